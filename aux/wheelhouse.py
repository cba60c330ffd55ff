"""Fills a folder, on a machine with network, with everything aux/setup.sh
installs, so that a node without network (an HPC compute node, an
air-gapped GPU machine) sets up from it:

    python3 aux/wheelhouse.py DIR [--python-version 3.12] [--platform manylinux_2_28_aarch64] [--with-torch]
    (copy DIR and the checkout over, then on the node:)
    CARAML_WHEELHOUSE=DIR bash aux/setup.sh

Wheels only, for the target's Python and platform (default: this machine's
architecture): every line of the hashed lock (aux/lock/, all layers) that
applies there, each file checked against the lock's hashes. torch, and
what only it needs (CUDA libraries, triton), stay out unless --with-torch:
a GPU node keeps the torch that works with its driver (setup.sh builds the
venv on top of it). JUBE, which is not on PyPI, comes as Debian's pure-Python package,
unpacked into DIR/jube."""

from __future__ import annotations

import argparse
import platform as host_platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lock import LAYERS, NEVER, entries, framework_only, target_env


def platform_tags(platform: str) -> list[str]:
    """The platform and every older manylinux tag of the same architecture
    that a wheel may carry instead, as pip on the node accepts them (the
    CUDA libraries carry 2_5 to 2_27; never another architecture's)."""
    match = re.fullmatch(r"manylinux_(\d+)_(\d+)_(\w+)", platform)
    if not match:
        raise SystemExit(f"[caraml wheelhouse] ERROR: --platform {platform}: expected a manylinux tag "
                         "such as manylinux_2_28_x86_64 or manylinux_2_28_aarch64")
    glibc_minor, arch = int(match.group(2)), match.group(3)
    # aarch64 wheels start at glibc 2.17 (manylinux2014); x86_64 ones at 2.5 (manylinux1)
    oldest = 5 if arch in ("x86_64", "i686") else 17
    older = [f"manylinux_2_{m}_{arch}" for m in range(glibc_minor - 1, oldest - 1, -1)]
    legacy = [f"manylinux2014_{arch}"]
    if oldest == 5:
        legacy += [f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    return [platform] + older + legacy


def selected(python_version: str, machine: str, with_torch: bool, locks: list[Path]) -> list[str]:
    """The lock's lines (hashes included) that a node of this Python and
    architecture installs. pip download would judge the lines' markers by
    the machine it runs on, not by the node, so they are judged here."""
    found = [e for path in locks for e in entries(path)]
    leave_out = set() if with_torch else framework_only(found)
    env = target_env(python_version, machine)
    return [e.unmarked() for e in found if e.marker != NEVER and e.applies(env) and e.name not in leave_out]


def download(lines: list[str], out: Path, pip_target: list[str]) -> bool:
    """pip download of the lines, each file checked against its hashes"""
    with tempfile.TemporaryDirectory() as tmp:
        wanted = Path(tmp) / "requirements.txt"
        wanted.write_text("\n".join(lines) + "\n")
        cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--no-deps",
               "--require-hashes", *pip_target, "-d", str(out), "-r", str(wanted)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        said = [line.strip() for line in proc.stderr.splitlines() if line.strip()] or ["?"]
        # pip's own ERROR line, and the file it names (a hash mismatch names it below)
        at = max((i for i, line in enumerate(said) if line.startswith("ERROR:")), default=len(said) - 1)
        print(f"[caraml wheelhouse] ERROR: pip download stopped: {' '.join(said[at:at + 2])}",
              file=sys.stderr)
    return proc.returncode == 0


def fill(out: Path, python_version: str, platform: str, with_torch: bool) -> bool:
    tags = platform_tags(platform)
    target = ["--python-version", python_version, "--implementation", "cp"]
    for tag in tags:
        target += ["--platform", tag]
    machine = re.fullmatch(r"manylinux_\d+_\d+_(\w+)", platform).group(1)
    lines = selected(python_version, machine, with_torch, [c.path for c in LAYERS])
    return download(lines, out, target)
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
    if not fill(args.dir, args.python_version, args.platform, args.with_torch):
        return 1
    add_jube(args.dir)
    wheels = len(list(args.dir.glob("*.whl")))
    print(f"[caraml wheelhouse] {wheels} wheels and JUBE in {args.dir} for Python "
          f"{args.python_version} on {args.platform}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
