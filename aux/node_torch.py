"""Installs the suite into a virtual environment made on top of a node's
own torch (a module, a container, a vendor build) without ever installing
another torch. megatron-core and torchrun-jsc require torch (>=2.6.0 and
>=1.9); a vendor build such as NGC's 2.6.0a0 does not satisfy that, and pip
would fetch PyPI's torch over it. So the packages that require torch are
installed without their dependencies, and what else they need is installed
with its own; a constraint pins torch to the node's version, so that a
package that still asks for another torch stops the install instead.

    python aux/node_torch.py --constraint aux/constraints.txt [--extras E --suite ROOT]
                             [REQUIREMENT ...] [-- PIP_OPTIONS ...]

Run it with the venv's Python; PIP_OPTIONS (--no-index --find-links DIR)
tell pip where packages come from."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from wheelhouse import FRAMEWORK, name_of, requirements


def needs_framework(requires_dist: list[str]) -> bool:
    return any(name_of(r) in FRAMEWORK for r in requires_dist if "extra ==" not in r)


def split(reqs: list[str], report: dict) -> tuple[list[str], list[str]]:
    """(requirements to install with their dependencies, requirements to
    install without): pip's dry-run report of reqs tells which need torch;
    what those need besides the framework joins the first list."""
    needing = {}
    for item in report["install"]:
        meta = item["metadata"]
        if needs_framework(meta.get("requires_dist", [])):
            needing[name_of(meta["name"])] = meta["requires_dist"]
    with_deps = [r for r in reqs if name_of(r) not in needing and name_of(r) not in FRAMEWORK]
    for requires in needing.values():
        with_deps += [r for r in requires if "extra ==" not in r and name_of(r) not in FRAMEWORK]
    without_deps = [r for r in reqs if name_of(r) in needing]
    return with_deps, without_deps


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


def node_constraints(lock: Path, torch_version: str, out: Path) -> Path:
    """The lock without the framework's lines and without the packages the
    node brings (they are kept as they are where they satisfy the suite),
    and torch pinned to the node's."""
    keep_as_is = FRAMEWORK | node_packages()
    kept = [line for line in lock.read_text().splitlines()
            if not line.strip() or line.startswith("#") or name_of(line) not in keep_as_is]
    out.write_text("\n".join(kept + [f"torch=={torch_version}"]) + "\n")
    return out


def pip(*args: str) -> None:
    print("+ pip " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cut = argv.index("--") if "--" in argv else len(argv)
    pip_options = argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--constraint", type=Path, required=True, help="the stack's lock file")
    ap.add_argument("--extras", default="", help="the suite's extras, comma-separated")
    ap.add_argument("--suite", type=Path, help="the checkout, installed editable without dependencies")
    ap.add_argument("requirement", nargs="*")
    args = ap.parse_args(argv[:cut])
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        print("[caraml setup] ERROR: this Python has no torch of its own to keep; "
              "set CARAML_SYSTEM_TORCH=0 to install the standard build", file=sys.stderr)
        return 1
    reqs = list(args.requirement)
    if args.extras:
        reqs += requirements([e for e in args.extras.split(",") if e])
    constraint = node_constraints(args.constraint, torch_version,
                                  Path(sys.prefix) / "caraml-node-constraints.txt")
    print(f"[caraml setup] keeping this node's torch {torch_version}", flush=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            report_file = Path(tmp) / "report.json"
            pip("install", "--dry-run", "--quiet", "--ignore-installed", "--no-deps", "--report",
                str(report_file), "-c", str(constraint), *pip_options, *reqs)
            with_deps, without_deps = split(reqs, json.loads(report_file.read_text()))
        pip("install", "-c", str(constraint), *pip_options, *with_deps)
        if without_deps:
            pip("install", "--no-deps", "-c", str(constraint), *pip_options, *without_deps)
        if args.suite:
            pip("install", "--no-deps", *pip_options, "-e", str(args.suite))
    except subprocess.CalledProcessError:
        print(f"[caraml setup] ERROR: pip stopped (above) while keeping this node's torch "
              f"{torch_version}; if a package asks for another torch, load a newer torch module "
              f"or set CARAML_SYSTEM_TORCH=0 for the standard build", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
