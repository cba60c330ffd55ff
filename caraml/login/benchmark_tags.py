"""The tags of the README's main command that belong to one benchmark: a
model size such as 800M means something to the LLM benchmark only and must
not make the image benchmark refuse its run. A tag that no benchmark knows
is kept, so that the pre-flight names it.

    python -m caraml.login.benchmark_tags SCRIPT --other SCRIPT [--other ...] TAG...

prints the tags for SCRIPT, one a line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from caraml.login.preflight import declared_tags
from caraml.login.systems import PLATFORM_XML


def for_script(script: Path, others: list[Path], tags: list[str],
               platform: Path = PLATFORM_XML) -> list[str]:
    own = declared_tags(script, platform)
    elsewhere = set().union(*(declared_tags(other) for other in others)) if others else set()
    return [t for t in tags if t in own or t not in elsewhere]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("script", type=Path)
    ap.add_argument("--other", type=Path, action="append", default=[],
                    help="another benchmark's script")
    ap.add_argument("tags", nargs="*")
    args = ap.parse_intermixed_args(argv)  # the tags come after --other
    for tag in for_script(args.script, args.other, args.tags):
        print(tag)
    return 0


if __name__ == "__main__":
    sys.exit(main())
