"""What the row model reads of a work package: its job's texts (job.out,
job.err, the driver's stderr, the error and signal markers, the data step's
errors, jpwr combine's output) and its parameters, from JUBE's own record of
the run (workpackages.xml). Standard library only (login node)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

# The job script writes each signal that reached it here, one name a line
# (aux/job.sh.in); jobwatch.py reads it too
SIGNAL_FILE = "signal"
# The power guard's record of each node: this, then the host's name
# (caraml/power_guard.py)
GUARD_FILES = "power_guard."
# the evidence's name for the job script's done marker ("yes" where it is there)
DONE = "done"


@dataclass
class Evidence:
    """What a work package left: the texts the model reads, by name."""

    texts: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    work_package: str = ""

    def text(self, *names: str) -> str:
        return "\n".join(self.texts.get(n, "") for n in names)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def workpackage_params(run_dir: Path) -> dict[int, dict[str, str]]:
    """Each work package's parameters from JUBE's record of the run: the
    evaluated value where JUBE evaluated one (python and shell modes)."""
    root = ET.parse(run_dir / "workpackages.xml").getroot()
    out = {}
    for wp in root.iter("workpackage"):
        out[int(wp.get("id"))] = {
            p.get("name"): (p.findtext("selection") if p.find("selection") is not None
                            else p.findtext("value") or "")
            for p in wp.iter("parameter")}
    return out


def workpackage_parent(run_dir: Path, wp_id: int) -> int | None:
    root = ET.parse(run_dir / "workpackages.xml").getroot()
    for wp in root.iter("workpackage"):
        if int(wp.get("id")) == wp_id:
            parents = (wp.findtext("parents") or "").split(",")
            return int(parents[0]) if parents[0].strip() else None
    return None


def data_step(run_dir: Path, wp_id: int) -> dict[str, str]:
    """The LLM's data step's errors (its failure is the row's), by name."""
    parent = workpackage_parent(run_dir, wp_id)
    if parent is None:
        return {}
    texts: dict[str, str] = {}
    for data_dir in run_dir.glob(f"{parent:06d}_*/work"):
        texts = data_errors(data_dir)
    return texts


def data_errors(data_work: Path) -> dict[str, str]:
    """The errors of the data step's work folder `data_work`, by name."""
    return {"data.stderr": _read(data_work / "stderr")}


def _wp_id(work_dir: Path) -> int:
    """The id of a work package from its folder name (000003_execute/work)."""
    return int(work_dir.resolve().parent.name.split("_", 1)[0])


def gather(execute_work: Path, jpwr_out: Path | None = None, jpwr_err: Path | None = None,
           jpwr_status: int | None = None) -> Evidence:
    """The evidence of one execute work package (and its combine step, where
    it ran)."""
    execute_work = execute_work.resolve()
    run_dir = execute_work.parents[1]
    params = workpackage_params(run_dir)
    wp_id = _wp_id(execute_work)
    texts = {name: _read(execute_work / name)
             for name in ("job.out", "job.err", "stderr", "stdout", "error", SIGNAL_FILE)}
    texts.update(data_step(run_dir, wp_id))
    # the power guard's record of each node (caraml/power_guard.py)
    texts["power_guard"] = "".join(_read(p) for p in sorted(execute_work.glob(f"{GUARD_FILES}*")))
    # the job script's done marker, an empty file: whether it is there
    texts[DONE] = "yes" if (execute_work / (params[wp_id].get("done_file") or "ready")).exists() else ""
    if jpwr_out is not None:
        texts["jpwr"] = _read(jpwr_out)
        texts["jpwr.err"] = _read(jpwr_err) if jpwr_err else ""
        texts["jpwr.status"] = str(jpwr_status if jpwr_status is not None else 0)
    return Evidence(texts, params[wp_id], str(execute_work))
