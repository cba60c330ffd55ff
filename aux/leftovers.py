"""What a command leaves behind: runs it with a temporary folder of its own
(TMPDIR, which the suite, torchrun, ReFrame and Python's tempfile follow),
then lists what is new in that folder, in the machine's temporary folder
(where a program that ignores TMPDIR writes; on a shared host other
users' programs add theirs too) and in the checkout (git's untracked and
ignored files, less what --keep allows: a run's folders, a corpus).

    python aux/leftovers.py [--keep GLOB ...] -- COMMAND ...

Exits 1 where the command left something in its temporary folder or the
checkout, else with the command's own status. Standard library only."""

from __future__ import annotations

import argparse
import fnmatch
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


def checkout_files() -> set[str]:
    """The checkout's untracked and ignored files, each listed (folders opened)."""
    listed = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "-z"],
                            cwd=CHECKOUT, capture_output=True, check=True).stdout.decode().split("\0")
    return {entry[3:] for entry in listed if entry[:2] in ("??", "!!")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="append", default=[".venv/*"], metavar="GLOB",
                        help="a path of the checkout the command may leave (repeatable)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run after --")
    machine = Path(tempfile.gettempdir())
    before_machine, before_checkout = set(os.listdir(machine)), checkout_files()
    with tempfile.TemporaryDirectory(prefix="caraml-leftovers-") as own:
        status = subprocess.run(command, env={**os.environ, "TMPDIR": own}).returncode
        left = sorted(str(p.relative_to(own)) for p in Path(own).rglob("*"))
    in_machine = sorted(set(os.listdir(machine)) - before_machine - {Path(own).name})
    in_checkout = sorted(path for path in checkout_files() - before_checkout
                         if not any(fnmatch.fnmatch(path, glob) for glob in args.keep))
    for what, found in (("in its temporary folder", left), ("in the checkout", in_checkout),
                        (f"in {machine} (this command's, or another program's)", in_machine)):
        print(f"new {what}: {', '.join(found) if found else 'nothing'}")
    return 1 if left or in_checkout else status


if __name__ == "__main__":
    sys.exit(main())
