"""Fills a folder, on a machine with network, with everything aux/setup.sh
installs, so that a node without network (an HPC compute node, an
air-gapped GPU machine) sets up from it:

    python3 aux/wheelhouse.py DIR [--python-version 3.12] [--platform manylinux_2_28_aarch64] [--with-torch]
    (copy DIR and the checkout over, then on the node:)
    CARAML_WHEELHOUSE=DIR bash aux/setup.sh

Wheels only, for the target's Python and platform (default: this machine's
architecture); the suite's requirements come from pyproject.toml, their
versions from aux/constraints.txt. torch stays out unless --with-torch: a
GPU node keeps the torch that works with its driver (setup.sh builds the
venv on top of it), so megatron-core's and torchrun-jsc's requirement of
torch is not followed. JUBE, which is not on PyPI, comes as Debian's pure-Python package,
unpacked into DIR/jube."""

from __future__ import annotations

import argparse
import platform as host_platform
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "aux" / "constraints.txt"
EXTRAS = ("bench", "test", "nvidia", "rocm", "jsc", "h5")
FRAMEWORK = {"torch", "torchvision", "torchaudio", "triton"}


def name_of(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def requirements(extras: list[str]) -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    wanted = list(project["dependencies"])
    for extra in extras:
        # `host = ["caraml[torch,bench]"]` names the suite's own extras
        wanted += [r for r in project["optional-dependencies"][extra] if name_of(r) != "caraml"]
    # pip needs the suite's build backend to install it (editable) offline
    return wanted + pyproject["build-system"]["requires"] + ["pip", "wheel"]


def wheel_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    return [line.split(":", 1)[1].strip() for line in lines
            if line.startswith("Requires-Dist:") and "extra ==" not in line]


def download(requirement: str, out: Path, pip_target: list[str], deps: bool) -> bool:
    cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", *pip_target,
           "-c", str(CONSTRAINTS), "-d", str(out), requirement] + ([] if deps else ["--no-deps"])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        print(f"[caraml wheelhouse] no wheel for {requirement}: {last}", file=sys.stderr)
    return proc.returncode == 0


def platform_tags(platform: str) -> list[str]:
    """The platform and the older manylinux tags of the same architecture
    that a wheel may carry instead (never another architecture's)."""
    match = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", platform)
    if not match:
        raise SystemExit(f"[caraml wheelhouse] ERROR: --platform {platform}: expected a manylinux tag "
                         "such as manylinux_2_28_x86_64 or manylinux_2_28_aarch64")
    glibc_minor, arch = int(match.group(2)), match.group(3)
    older = [f"manylinux_2_{m}_{arch}" for m in (27, 17) if m < glibc_minor]
    legacy = [f"manylinux2014_{arch}"] + ([f"manylinux1_{arch}"] if arch == "x86_64" else [])
    return [platform] + older + legacy


def fill(out: Path, python_version: str, platform: str, with_torch: bool) -> list[str]:
    """Downloads the requirements; returns those no wheel was found for."""
    tags = platform_tags(platform)
    target = ["--python-version", python_version, "--implementation", "cp"]
    for tag in tags:
        target += ["--platform", tag]
    extras = (["torch"] if with_torch else []) + list(EXTRAS)
    missing = []
    for req in requirements(extras):
        if with_torch or name_of(req) in FRAMEWORK:
            ok = download(req, out, target, deps=True)
        else:
            # Fetched alone first: a package that needs torch (megatron-core)
            # must not bring a CUDA build of it along.
            ok = download(req, out, target, deps=False)
            wheel = max(out.glob(f"{name_of(req).replace('-', '_')}-*.whl"), default=None,
                        key=lambda p: p.stat().st_mtime)
            if ok and wheel and not {name_of(r) for r in wheel_requirements(wheel)} & FRAMEWORK:
                ok = download(req, out, target, deps=True)
            elif ok and wheel:
                for dep in wheel_requirements(wheel):
                    if name_of(dep) not in FRAMEWORK:
                        ok &= download(dep.split(";")[0], out, target, deps=True)
        if not ok:
            missing.append(req)
    return missing


def add_jube(out: Path) -> None:
    if (out / "jube" / "usr" / "bin" / "jube").is_file():
        return
    if not shutil.which("apt-get"):
        raise SystemExit("[caraml wheelhouse] ERROR: JUBE comes from Debian's package and apt-get "
                         f"is missing here; unpack JUBE's release into {out}/jube "
                         "(usr/bin/jube and usr/lib/python3/dist-packages/jube2)")
    if subprocess.run(["apt-get", "download", "jube"], cwd=out, capture_output=True).returncode:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "download", "jube"], cwd=out, check=True)
    deb = max(out.glob("jube_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(deb), str(out / "jube")], check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--python-version", default=f"{sys.version_info[0]}.{sys.version_info[1]}")
    ap.add_argument("--platform", default=f"manylinux_2_28_{host_platform.machine()}",
                    help="the nodes' manylinux tag (default: this machine's architecture), "
                         "e.g. manylinux_2_28_aarch64 for GH200 nodes")
    ap.add_argument("--with-torch", action="store_true",
                    help="also torch and torchvision (for nodes without a working torch)")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    missing = fill(args.dir, args.python_version, args.platform, args.with_torch)
    add_jube(args.dir)
    wheels = len(list(args.dir.glob("*.whl")))
    print(f"[caraml wheelhouse] {wheels} wheels and JUBE in {args.dir} for Python "
          f"{args.python_version} on {args.platform}")
    if missing:
        print(f"[caraml wheelhouse] ERROR: no wheel for {' '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
