"""The suite's own requirements for an image that brings its framework:
pyproject.toml's dependencies and the extras named on the command line,
less every distribution the running Python already has (the image's torch
above all). Prints one requirement per line; --no-deps prints only those
that are built on torch, --with-deps the others.

    python requirements.py pyproject.toml host nvidia jsc --no-deps
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

# Built on torch: installed without their dependencies, so that resolving
# them can never replace the image's torch (NGC's pre-release builds, such as
# 2.6.0a0, do not satisfy a plain ">=2.6.0").
ON_TORCH = {"megatron-core", "torchrun-jsc"}

NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wanted(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"requirements.py: no extra {', '.join(unknown)} in {pyproject} "
                         f"(extras: {', '.join(optional)})")
    return list(project.get("dependencies", [])) + [r for e in extras for r in optional[e]]


def installed(name: str) -> bool:
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pyproject", type=Path)
    ap.add_argument("extras", nargs="*")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--no-deps", action="store_true", help="the requirements built on torch")
    group.add_argument("--with-deps", action="store_true", help="all other requirements")
    args = ap.parse_args(argv)
    for requirement in wanted(args.pyproject, args.extras):
        name = normalized(NAME.match(requirement).group(1))
        if installed(name) or (name in ON_TORCH) != args.no_deps:
            continue
        print(requirement)
    return 0


if __name__ == "__main__":
    sys.exit(main())
