"""Installs the locked stack into a virtual environment made on top of a
node's own torch (a module, a container, a vendor build) without ever
installing another torch. megatron-core and torchrun-jsc require torch
(>=2.6.0 and >=1.9); a vendor build such as NGC's 2.6.0a0 does not satisfy
that, and pip would fetch PyPI's torch over it. So the lock's packages are
installed without their dependencies (the lock is complete), less the
framework and what only it needs (CUDA libraries, triton) and less the
packages the node brings; a node package that an installed package does
not accept is installed at the lock's version after all.

    python aux/node_torch.py -r aux/lock/main.txt [-r aux/lock/test.txt ...] [-- PIP_OPTIONS ...]

Run it with the venv's Python; PIP_OPTIONS (--no-index --find-links DIR)
tell pip where packages come from."""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

from lock import Entry, entries, framework_only, name_of


def node_packages() -> set[str]:
    """Names of the packages the node brings (outside this venv): its torch
    stack, whose companions (numpy, ...) it was built and tested with."""
    venv = Path(sys.prefix).resolve()
    names = set()
    for dist in importlib.metadata.distributions():
        where = Path(dist.locate_file("")).resolve()
        if venv not in where.parents and where != venv:
            names.add(name_of(dist.metadata["Name"]))
    return names


def wanted(locks: list[Path], node: set[str]) -> list[Entry]:
    """The lock's lines for this Python and platform that the venv installs"""
    found = [e for path in locks for e in entries(path)]
    leave_out = framework_only(found) | node
    return [e for e in found if e.applies(None) and e.name not in leave_out]


def rejected(check_output: str, replaceable: set[str]) -> set[str]:
    """Of the node's packages the lock may replace, those that pip check
    says an installed package does not accept"""
    said = re.findall(r"^\S+ \S+ has requirement .*, but you have (\S+) \S+\.$", check_output, re.M)
    return {name_of(n) for n in said} & replaceable


def pip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    print("+ pip " + " ".join(args), flush=True)
    return subprocess.run([sys.executable, "-m", "pip", *args], check=check,
                          stdout=None if check else subprocess.PIPE, text=True)


def install(selected: list[Entry], out: Path, pip_options: list[str]) -> None:
    out.write_text("".join(e.text + "\n" for e in selected))
    pip("install", "--require-hashes", "--no-deps", *pip_options, "-r", str(out))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    pip_options = argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-r", dest="locks", type=Path, action="append", required=True,
                    help="a layer of the lock (aux/lock/), bases first")
    args = ap.parse_args(argv[:cut])
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        print("[caraml setup] ERROR: this Python has no torch of its own to keep; "
              "set CARAML_SYSTEM_TORCH=0 to install the standard build", file=sys.stderr)
        return 1
    print(f"[caraml setup] keeping this node's torch {torch_version}", flush=True)
    node = node_packages()
    out = Path(sys.prefix) / "caraml-node-requirements.txt"
    try:
        install(wanted(args.locks, node), out, pip_options)
        checked = pip("check", check=False)
        replaceable = node & {e.name for e in wanted(args.locks, set())}
        upgrade = rejected(checked.stdout, replaceable)
        if upgrade:
            print(f"[caraml setup] the lock's versions of {', '.join(sorted(upgrade))}: "
                  "the node's are not accepted", flush=True)
            install([e for e in wanted(args.locks, node - upgrade) if e.name in upgrade], out, pip_options)
    except subprocess.CalledProcessError:
        print(f"[caraml setup] ERROR: pip stopped (above) while keeping this node's torch "
              f"{torch_version}; set CARAML_SYSTEM_TORCH=0 (and delete the venv) for the "
              f"standard build", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
