"""Fills a folder, on a machine with network, with everything aux/setup.sh
installs, so that a node without network (an HPC compute node, an
air-gapped GPU machine) sets up from it:

    python3 aux/wheelhouse.py DIR [--python-version 3.12] [--platform manylinux_2_28_aarch64] [--with-torch]
        [--node-packages FILE]
    (copy DIR and the checkout over, then on the node:)
    CARAML_WHEELHOUSE=DIR bash aux/setup.sh

Wheels only, for the target's Python and platform (default: this machine's
architecture): every line of the hashed lock (aux/lock/, all layers) that
applies there, each file checked against the lock's hashes. torch, and
what only it needs (CUDA libraries, triton), stay out unless --with-torch:
a GPU node keeps the torch that works with its driver (setup.sh builds the
venv on top of it). With --node-packages (the node's `python3 -m pip list
--format=freeze`, or one name a line) the packages the node brings stay out
too, as aux/node_torch.py leaves them, so that a GPU node's wheelhouse
holds only what the node lacks; the lock's wheel of a node package comes
along all the same where the node's version is unknown or fails what one
of the wheels asks of it (node_torch.py installs it only where pip check
rejects the node's). JUBE, which is not on PyPI, comes as Debian's
pure-Python package, unpacked into DIR/jube."""

from __future__ import annotations

import argparse
import email.parser
import platform as host_platform
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from lock import LAYERS, NEVER, Entry, entries, framework_only, name_of, target_env

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion
except ImportError:  # a bare Python with pip only: pip's own copy
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
    from pip._vendor.packaging.version import InvalidVersion


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


def chosen(python_version: str, machine: str, with_torch: bool, locks: list[Path],
           node: dict[str, str | None] | None = None) -> list[Entry]:
    """The lock's entries that a node of this Python and architecture
    installs, less the packages the node brings. pip download would judge
    the lines' markers by the machine it runs on, not by the node, so they
    are judged here."""
    found = [e for path in locks for e in entries(path)]
    leave_out = (set() if with_torch else framework_only(found)) | set(node or {})
    env = target_env(python_version, machine)
    return [e for e in found if e.marker != NEVER and e.applies(env) and e.name not in leave_out]


def selected(python_version: str, machine: str, with_torch: bool, locks: list[Path],
             node: dict[str, str | None] | None = None) -> list[str]:
    """chosen()'s lines (hashes included), without their markers"""
    return [e.unmarked() for e in chosen(python_version, machine, with_torch, locks, node)]


def read_node_packages(path: Path) -> dict[str, str | None]:
    """name -> version (None where only the name is given) from a node's
    `pip list --format=freeze` or a list of names, one a line"""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit(f"[caraml wheelhouse] ERROR: --node-packages {path}: cannot be read "
                         f"({e}); give the node's 'python3 -m pip list --format=freeze'") from None
    node = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            node[name_of(name)] = version.strip() or None
    return node


def requirements_of(wheel: Path, env: dict[str, str]) -> list[Requirement]:
    """What a wheel's metadata requires on the node (its markers judged there)"""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        headers = email.parser.Parser().parsestr(z.read(meta).decode())
    out = []
    for text in headers.get_all("Requires-Dist") or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is None or req.marker.evaluate(env):
            out.append(req)
    return out


def unsure(req: Requirement, version: str | None) -> bool:
    """Whether a node package's version may not satisfy the requirement"""
    if not str(req.specifier):
        return False
    try:
        return version is None or not req.specifier.contains(version, prereleases=True)
    except InvalidVersion:
        return True


def fallbacks(out: Path, node: dict[str, str | None], lock: dict[str, Entry],
              env: dict[str, str]) -> dict[str, Entry]:
    """The lock's entries of node packages that a wheel in `out` asks for
    at a version the node may not have"""
    wanted = {}
    for wheel in out.glob("*.whl"):
        for req in requirements_of(wheel, env):
            name = name_of(req.name)
            if name in node and name in lock and unsure(req, node[name]):
                wanted[name] = lock[name]
    return wanted


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


def fill(out: Path, python_version: str, platform: str, with_torch: bool,
         node: dict[str, str | None] | None = None) -> bool:
    tags = platform_tags(platform)
    target = ["--python-version", python_version, "--implementation", "cp"]
    for tag in tags:
        target += ["--platform", tag]
    machine = re.fullmatch(r"manylinux_\d+_\d+_(\w+)", platform).group(1)
    locks = [c.path for c in LAYERS]
    if not download(selected(python_version, machine, with_torch, locks, node), out, target):
        return False
    if not node:
        return True
    # a fallback's own requirements may ask for more: until nothing is added
    lock = {e.name: e for e in chosen(python_version, machine, with_torch, locks)}
    env = target_env(python_version, machine)
    have: set[str] = set()
    while more := [e for name, e in sorted(fallbacks(out, node, lock, env).items()) if name not in have]:
        print(f"[caraml wheelhouse] the lock's {', '.join(e.name for e in more)} as well: the "
              "node's version is unknown or not what a wheel asks for", flush=True)
        have |= {e.name for e in more}
        if not download([e.unmarked() for e in more], out, target):
            return False
    return True


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
    ap.add_argument("--node-packages", type=Path,
                    help="the packages the node brings, left out (its 'python3 -m pip list "
                         "--format=freeze', or one name a line)")
    args = ap.parse_args()
    node = read_node_packages(args.node_packages) if args.node_packages else None
    args.dir.mkdir(parents=True, exist_ok=True)
    if not fill(args.dir, args.python_version, args.platform, args.with_torch, node):
        return 1
    add_jube(args.dir)
    wheels = len(list(args.dir.glob("*.whl")))
    print(f"[caraml wheelhouse] {wheels} wheels and JUBE in {args.dir} for Python "
          f"{args.python_version} on {args.platform}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
