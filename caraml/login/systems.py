"""The systems of platform.xml, for Python: the same blocks JUBE reads, so
a system's properties are written once. Standard library only: it runs on
login nodes before any environment is set up."""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

PLATFORM_XML = Path(__file__).resolve().parents[2] / "platform.xml"
SYSTEM_SET = "systemParameter"
# the system's block as a job's work package keeps it (write_block)
BLOCK_FILE = "system.json"


@dataclass(frozen=True)
class System:
    """One system tag's parameters (defaults merged in), as written in
    platform.xml: values that JUBE computes (mode="python") stay unevaluated."""

    tag: str
    params: dict[str, str]

    def __getitem__(self, name: str) -> str:
        return self.params[name]

    @property
    def device_kind(self) -> str:
        return self.params["device_kind"]

    @property
    def nodes_available(self) -> int | None:
        """Nodes the system's partition has; None where platform.xml does not say."""
        value = _number(self.params["nodes_available"])
        return None if value is None else int(value)

    @property
    def package(self) -> tuple[str, int] | None:
        """The accelerator package one buys and plugs in (an A100 card, an
        MI250 card of 2 GCDs, a GH200 superchip) and how many of the
        system's devices make one; None where platform.xml does not say."""
        unit, count = self.params.get("package_unit", ""), _number(self.params.get("devices_per_package", ""))
        return (unit, int(count)) if unit and count else None

    @property
    def container(self) -> str:
        """The definition containers/<container>.def; empty: no container."""
        return self.params["container"]


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _parameterset(path: Path, name: str) -> ET.Element:
    root = ET.parse(path).getroot()
    for pset in root.iter("parameterset"):
        if pset.get("name") == name:
            return pset
    raise ValueError(f"{path}: no parameterset named {name!r}")


def load(path: Path = PLATFORM_XML) -> dict[str, System]:
    """Every system tag of platform.xml, in file order. A parameter tagged
    with alternatives ("A100|H100|WAIH100", as JUBE reads it) belongs to
    each of them; later parameters override earlier ones, so a shared block
    comes before the systems' own."""
    pset = _parameterset(path, SYSTEM_SET)
    defaults: dict[str, str] = {}
    blocks: dict[str, dict[str, str]] = {}
    for par in pset.iter("parameter"):
        tag = par.get("tag")
        value = (par.text or "").strip()
        name = par.get("name", "")
        if tag is None:
            defaults[name] = value
        else:
            for alternative in tag.split("|"):
                blocks.setdefault(alternative.strip(), {})[name] = value
    # A block is a system when it names itself; other tagged parameters
    # (slurm, local, ...) switch a mode and are not systems.
    return {
        tag: System(tag, {**defaults, **params})
        for tag, params in blocks.items()
        if params.get("system_name") == tag
    }


def names(path: Path = PLATFORM_XML) -> list[str]:
    return list(load(path))


def write_block(tag: str, folder: Path, path: Path = PLATFORM_XML) -> Path | None:
    """The system's block of platform.xml as the job was planned with it
    (its parameters, the shared ones merged in, and the file's sha256) into
    folder's system.json: part of the run's raw evidence (caraml/audit).
    None for a tag platform.xml does not name as a system."""
    system = load(path).get(tag)
    if system is None:
        return None
    out = folder / BLOCK_FILE
    out.write_text(json.dumps({"tag": tag, "params": system.params,
                               "platform_xml_sha256": hashlib.sha256(path.read_bytes()).hexdigest()},
                              indent=1) + "\n")
    return out
