"""Checks that run before a job is submitted, where JUBE itself is silent:
JUBE ignores a tag it does not know and runs on without a system tag. Each
problem is one `CARAML ERROR:` line and a non-zero exit, so the work
package fails and the result table shows a failed row that says why.

Standard library only: JUBE runs this with the login node's python3."""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from caraml import report, systems  # noqa: E402

# tag="A100|H100", tag: "!container+800M", {tag: 13B, ...}
TAG_DECLARATION = re.compile(r"""\btag\s*[=:]\s*["']?([^"'}\n]+)""")
TAG_WORD = re.compile(r"[A-Za-z0-9_.\-]+")


class PreflightError(Exception):
    pass


def declared_tags(*files: Path) -> set[str]:
    """Every tag name any tag expression in these files mentions."""
    tags: set[str] = set()
    for path in files:
        for expression in TAG_DECLARATION.findall(path.read_text()):
            tags.update(TAG_WORD.findall(expression))
    return tags


def selected_tags(run_config: Path) -> list[str]:
    """The tags given to `jube run`, as JUBE recorded them for this run."""
    root = ET.parse(run_config).getroot()
    return [t.text.strip() for t in root.iter("tag") if t.text and t.text.strip()]


def check_tags(selected: list[str], known: set[str], system_tags: list[str]) -> None:
    unknown = [t for t in selected if t not in known]
    if unknown:
        raise PreflightError(
            f"unknown tag{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"systems: {', '.join(system_tags)}; other tags: "
            f"{', '.join(sorted(known - set(system_tags)))}")
    chosen = [t for t in selected if t in system_tags]
    if not chosen:
        raise PreflightError(f"no system tag given; add one of: {', '.join(system_tags)}")
    if len(chosen) > 1:
        raise PreflightError(f"several system tags given ({', '.join(chosen)}); give exactly one")


def check_container(image: str, definition: str, script: Path, system: str) -> None:
    if image and not Path(image).is_file():
        raise PreflightError(
            f"container image {image} not found; build it with: "
            f"jube run {script.parent.name}/{script.name} --tag container {system}"
            + (f" (definition {definition})" if definition else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-config", type=Path, required=True,
                    help="configuration.xml that JUBE wrote for this run")
    ap.add_argument("--script", type=Path, required=True, help="the benchmark's JUBE script")
    ap.add_argument("--platform", type=Path, default=systems.PLATFORM_XML)
    ap.add_argument("--system", required=True, help="system_name as JUBE resolved it")
    ap.add_argument("--container", default="", help="image the job runs in, if any")
    ap.add_argument("--container-def", default="")
    args = ap.parse_args(argv)
    try:
        system_tags = systems.names(args.platform)
        check_tags(selected_tags(args.run_config),
                   declared_tags(args.script, args.platform), system_tags)
        check_container(args.container, args.container_def, args.script, args.system)
    except (PreflightError, OSError, ET.ParseError) as exc:
        report.error(str(exc))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
