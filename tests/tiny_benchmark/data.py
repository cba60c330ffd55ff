"""The tiny benchmark's data step: it decides the width of the random
vectors the driver trains on, hands the driver its data arguments in
data.args (argparse @file, as the LLM's data step does) and says what it
made in a `CARAML data:` line, which the benchmark's own columns show.
Standard library only (the login node runs it).

    python -m tests.tiny_benchmark.data --features 12 --driver-args-file data.args"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from caraml import report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tiny_benchmark.data", description=__doc__)
    parser.add_argument("--features", type=int, required=True, help="the width of each input vector")
    parser.add_argument("--driver-args-file", type=Path, required=True,
                        help="where the driver's arguments go")
    args = parser.parse_args(argv)
    if args.features < 1:
        report.error(f"--features {args.features}: give a width of 1 or more")
        return 2
    args.driver_args_file.write_text(f"--features\n{args.features}\n")
    report.emit("data", name="random-vectors", features=args.features)
    return 0


if __name__ == "__main__":
    sys.exit(main())
