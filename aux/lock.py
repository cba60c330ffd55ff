"""The hashed lock of the suite's stack, in layers, and what reads it.

    python3 aux/lock.py [--upgrade]     # regenerate aux/lock/*.txt (needs `uv` on PATH; docs/setup.md)
    python aux/lock.py layers main,test # the layers to install for these: main,reframe,h5,test
    python aux/lock.py check LAYERS     # `pip check` of this venv, less what those layers drop

Every layer is one `uv pip compile --universal --generate-hashes` of some
of pyproject.toml's extras: valid on every platform (x86_64 and aarch64
Linux included) and Python >= 3.11, each line with the hashes of all its
files. A layer holds only what its bases do not, pinned to their versions,
so `pip install --require-hashes --no-deps -r main.txt -r reframe.txt`
installs a complete, consistent set. aux/setup.sh installs it,
aux/wheelhouse.py downloads it, aux/node_torch.py installs it on a node's
own torch, leaving out what only the framework needs."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

try:
    from packaging.markers import Marker
except ImportError:  # a bare Python with pip only: pip's own copy
    from pip._vendor.packaging.markers import Marker

ROOT = Path(__file__).resolve().parents[1]
LOCK_DIR = ROOT / "aux" / "lock"
FRAMEWORK = {"torch", "torchvision", "torchaudio", "triton"}


@dataclass(frozen=True)
class Layer:
    name: str
    extras: tuple[str, ...]
    bases: tuple[str, ...]
    # Required by a package's metadata but never imported outside its own
    # tests or behind an `if installed`: neuraloperator's wandb,
    # configmypy's pytest and pytest-mock, and ReFrame's polars, which only
    # its results storage imports (off by default; the suite keeps its rows
    # in its own history) and whose runtime is a 50 MB wheel a GPU node's
    # offline wheelhouse has no room for. The lock keeps them with the
    # marker sys_platform == 'never' (pip skips such a line).
    dropped: tuple[str, ...]

    @property
    def path(self) -> Path:
        return LOCK_DIR / f"{self.name}.txt"


# The main command's environment, a vendor's sensor bindings (installed
# where that vendor's GPUs are: amdsmi fails to import without ROCm), what
# the ReFrame checks add, what jpwr's HDF5 files need, and what the tests
# add (the README's test command)
LAYERS = (
    Layer("main", ("torch", "bench", "jsc"), (), ("wandb", "pytest", "pytest-mock")),
    Layer("nvidia", ("nvidia",), ("main",), ()),
    Layer("rocm", ("rocm",), ("main",), ()),
    Layer("reframe", ("reframe",), ("main",), ("wandb", "pytest", "pytest-mock", "polars")),
    Layer("h5", ("h5",), ("main",), ("wandb", "pytest", "pytest-mock")),
    Layer("test", ("test",), ("main", "reframe", "h5"), ("wandb", "pytest-mock", "polars")),
)
NEVER = "sys_platform == 'never'"


def layer(name: str) -> Layer:
    for candidate in LAYERS:
        if candidate.name == name:
            return candidate
    raise SystemExit(f"[caraml lock] ERROR: '{name}' is no layer of the lock "
                     f"({', '.join(c.name for c in LAYERS)})")


def layers_for(names: list[str]) -> list[Layer]:
    """The layers to install for the asked ones, bases first, each once"""
    wanted = {"main"}
    for name in names:
        wanted |= {name, *layer(name).bases}
    return [c for c in LAYERS if c.name in wanted]


def name_of(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


@dataclass(frozen=True)
class Entry:
    """One pinned package of a lock file: its lines as written (hashes
    included), its marker and the packages that require it."""
    name: str
    version: str
    marker: str
    text: str
    via: frozenset[str]

    def applies(self, env: dict[str, str] | None) -> bool:
        return not self.marker or Marker(self.marker).evaluate(env)

    def unmarked(self) -> str:
        """The lines without the marker, for a target it was judged for:
        pip would judge it by the Python that runs pip"""
        head, sep, rest = self.text.partition(" \\\n")
        return f"{self.name}=={self.version}" + sep + rest


def entries(path: Path) -> list[Entry]:
    found = []
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text()):
        if not block[:1].isalnum():
            continue
        head = block.split("\\", 1)[0].strip()
        spec, _, marker = head.partition(";")
        name, _, version = spec.partition("==")
        text = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("#"))
        notes = [line.strip().lstrip("#").strip() for line in block.splitlines()
                 if line.lstrip().startswith("#")]
        # `# via a` or `# via` and one `#   a` a line; a root reads `caraml (pyproject.toml)`
        via = {name_of(n.removeprefix("via").strip() if n.startswith("via") else n) for n in notes}
        found.append(Entry(name_of(name), version.strip(), marker.strip(), text, frozenset(via - {""})))
    return found


def framework_only(found: list[Entry]) -> set[str]:
    """The framework and what only it requires (CUDA libraries, sympy...):
    what a node that keeps its own torch must not get."""
    names = {e.name for e in found}
    only = set(FRAMEWORK)
    while True:
        more = {e.name for e in found if e.name not in only and e.via
                and e.via <= names and e.via <= only}
        if not more:
            return only
        only |= more


def target_env(python_version: str, machine: str) -> dict[str, str]:
    """Marker values of a CPython on Linux (a node pip download serves)"""
    return {"python_version": python_version, "python_full_version": f"{python_version}.0",
            "platform_machine": machine, "sys_platform": "linux", "platform_system": "Linux",
            "os_name": "posix", "implementation_name": "cpython",
            "platform_python_implementation": "CPython", "extra": ""}


def compile_layers(upgrade: bool) -> None:
    """Regenerates every layer with uv from pyproject.toml: the versions
    already locked stay where pyproject.toml allows them, unless upgrade"""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    LOCK_DIR.mkdir(exist_ok=True)
    for current in LAYERS:
        bases = [layer(b) for b in current.bases]
        # a base's package is left out unless the base drops it
        kept = sorted({e.name for b in bases for e in entries(b.path) if e.marker != NEVER})
        overrides = LOCK_DIR / ".overrides.tmp"
        overrides.write_text("".join(f"{name}; {NEVER}\n" for name in current.dropped))
        # the suite's own build backend, installed without build isolation
        build = LOCK_DIR / "build-system.requires"
        build.write_text("\n".join(project["build-system"]["requires"] + ["pip"]) + "\n")
        cmd = ["uv", "pip", "compile", "--quiet", "--universal", "--python-version", "3.11",
               "--generate-hashes", "--custom-compile-command", "python3 aux/lock.py",
               "--override", str(overrides.relative_to(ROOT)), "pyproject.toml"]
        cmd += [arg for extra in current.extras for arg in ("--extra", extra)]
        cmd += ["--upgrade"] if upgrade else []
        if not bases:
            cmd += [str(build.relative_to(ROOT))]
        for base in bases:
            cmd += ["-c", str(base.path.relative_to(ROOT))]
        cmd += [arg for name in kept for arg in ("--no-emit-package", name)]
        cmd += ["-o", str(current.path.relative_to(ROOT))]
        cut = cmd.index("--no-emit-package") if kept else cmd.index("-o")
        more = f"  (and --no-emit-package for the bases' {len(kept)} packages)" if kept else ""
        print("+ " + shlex.join(cmd[:cut] + cmd[-2:]) + more, flush=True)
        try:
            subprocess.run(cmd, cwd=ROOT, check=True)
        finally:
            overrides.unlink()
            build.unlink()
        print(f"[caraml lock] {current.path.relative_to(ROOT)}: {len(entries(current.path))} packages")


def check(names: list[str]) -> int:
    """pip check, less 'X requires Y, which is not installed' for a Y that
    the installed layers drop on purpose"""
    dropped = {e.name for c in layers_for(names) for e in entries(c.path) if e.marker == NEVER}
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    if done.returncode == 0:
        return 0
    missing = re.compile(r"^\S+ \S+ requires (\S+), which is not installed\.$")
    left = [line for line in done.stdout.splitlines()
            if line.strip() and not ((m := missing.match(line)) and name_of(m.group(1)) in dropped)]
    print("\n".join(left + done.stderr.splitlines()))
    return 1 if left or done.stderr.strip() else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] in ("layers", "check"):
        names = [n for n in argv[1].split(",") if n]
        if argv[0] == "check":
            return check(names)
        print(",".join(c.name for c in layers_for(names)))
        return 0
    if argv not in ([], ["--upgrade"]):
        raise SystemExit(__doc__)
    compile_layers(upgrade=bool(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
