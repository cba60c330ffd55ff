"""JUBE's record of a run, read in this one place: the run folder's
workpackages.xml (each work package's step, parents and parameters, as
JUBE evaluated them) and configuration.xml (the tags the run was given).
The row model, the full table, the main command's follower, the
pre-flight checks, ReFrame's planner, the history and caraml-compare all
learn a run from here. Standard library only (the login node reads it).

A run folder is `<outpath>/<six-digit id>`; a work package's folder in it
is `<six-digit id>_<step>`, its work folder `<that>/work`."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

RECORD = "workpackages.xml"
CONFIGURATION = "configuration.xml"


@dataclass(frozen=True)
class WorkPackage:
    id: int
    step: str
    parents: tuple[int, ...]
    # each parameter's value: the evaluated one where JUBE evaluated it (python and shell modes)
    params: dict[str, str]
    # the parameters whose definition is a list (it holds its own separator): a sweep's
    swept: frozenset[str]
    # each parameter's definition as the script gave it (${...} references unexpanded)
    definitions: dict[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        return f"{self.id:06d}_{self.step}"


def work_packages(run_dir: Path) -> dict[int, WorkPackage]:
    """Every work package JUBE planned for the run, by id (OSError where the
    record is missing, ET.ParseError where JUBE is rewriting it)."""
    out = {}
    for wp in ET.parse(Path(run_dir) / RECORD).getroot().iter("workpackage"):
        params, swept, definitions = {}, set(), {}
        for p in wp.iter("parameter"):
            definition = p.findtext("value") or ""
            chosen = p.find("selection")
            name = p.get("name", "")
            params[name] = (chosen.text if chosen is not None else definition) or ""
            definitions[name] = definition
            if p.get("separator", ",") in definition:
                swept.add(name)
        parents = tuple(int(p) for p in (wp.findtext("parents") or "").split(",") if p.strip())
        wp_id = int(wp.get("id", ""))
        out[wp_id] = WorkPackage(wp_id, (wp.findtext("step") or "").strip(), parents, params,
                                 frozenset(swept), definitions)
    return out


def work_package_id(work: Path) -> int:
    """The id of a work package from its folder's name (000003_execute/work)."""
    return int(Path(work).resolve().parent.name.split("_", 1)[0])


def is_run(folder: Path) -> bool:
    return (Path(folder) / RECORD).is_file()


def run_above(work: Path) -> Path | None:
    """The run folder a work folder lies in; None outside a JUBE run (a
    ReFrame stage folder)."""
    for folder in (Path(work), *Path(work).parents):
        if is_run(folder):
            return folder
    return None


def last_run(path: Path) -> Path:
    """A run's folder: PATH itself, or the last run of the outpath PATH."""
    if is_run(path):
        return path
    runs = sorted(p for p in Path(path).glob("[0-9]*") if is_run(p))
    if not runs:
        raise ValueError(f"{path} is neither a JUBE run's folder nor an outpath with runs")
    return runs[-1]


def _runs_of_outpath(path: Path, all_runs: bool) -> list[Path]:
    runs = sorted((p for p in path.iterdir() if p.is_dir() and p.name.isdigit() and is_run(p)),
                  key=lambda p: int(p.name))
    return runs if all_runs else runs[-1:]


def runs_under(path: Path, all_runs: bool = False) -> list[Path]:
    """The runs a folder names: itself where it is a run, else the latest
    run of the outpath it is (every run with all_runs), else those of each
    outpath in it; [] where it holds none."""
    if path.name.isdigit() and is_run(path):
        return [path]
    runs = _runs_of_outpath(path, all_runs)
    if not runs:
        for child in sorted(p for p in path.iterdir() if p.is_dir()):
            runs += _runs_of_outpath(child, all_runs)
    return runs


def tags(configuration: Path) -> list[str]:
    """The tags given to `jube run`, as JUBE recorded them in the run's configuration.xml."""
    root = ET.parse(configuration).getroot()
    return [t.text.strip() for t in root.iter("tag") if t.text and t.text.strip()]
