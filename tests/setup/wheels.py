"""Tiny wheels, installed distributions and lock files for the set-up's
tests: pip treats them like any other, so the tests see what pip would
install."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path


def _metadata(name: str, version: str, requires: list[str]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    return "\n".join(lines + [f"Requires-Dist: {r}" for r in requires]) + "\n"


def wheel(folder: Path, name: str, version: str, requires: list[str] = ()) -> Path:
    """A pure-Python wheel whose package `name` holds __version__."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    files = {f"{module}/__init__.py": f"__version__ = {version!r}\n",
             f"{info}/METADATA": _metadata(name, version, list(requires)),
             f"{info}/WHEEL": ("Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                               "Tag: py3-none-any\n")}
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for n, text in files.items():
            z.writestr(n, text)
        z.writestr(f"{info}/RECORD", record)
    return path


def installed(site: Path, name: str, version: str) -> None:
    """An installed distribution (e.g. a module's torch) in folder `site`."""
    module = name.replace("-", "_")
    (site / module).mkdir(parents=True)
    (site / module / "__init__.py").write_text(f"__version__ = {version!r}\n")
    info = site / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(_metadata(name, version, []))
    (info / "RECORD").write_text("")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lock_entry(name: str, version: str, files: list[Path], marker: str = "",
               via: tuple[str, ...] = ("caraml (pyproject.toml)",)) -> str:
    """One package of a lock file as `uv pip compile --generate-hashes` writes it"""
    head = f"{name}=={version}" + (f" ; {marker}" if marker else "")
    hashes = [f"    --hash=sha256:{sha256(f)}" for f in files]
    notes = [f"    # via {via[0]}"] if len(via) == 1 else ["    # via"] + [f"    #   {v}" for v in via]
    return " \\\n".join([head] + hashes) + "\n" + "\n".join(notes) + "\n"
