"""What the row model reads of a work package: its job's texts (job.out,
job.err, the driver's stderr, the error and signal markers, the data step's
errors, the power guards' records, jpwr combine's output), its node energy
file and its parameters, from JUBE's own record of the run
(caraml/jube_run.py). Standard library only (login node)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from caraml import jube_run
from caraml.job.log import last_attempt
from caraml.job.node_energy import FILE_NAME as NODE_ENERGY_FILE
from caraml.job.node_energy import NodeEnergy, read_node_energy
from caraml.power_limit import GUARD_FILES

# The job script writes each signal that reached it here, one name a line
# (aux/job.sh.in); caraml/job/watch.py reads it too
SIGNAL_FILE = "signal"
# the evidence's name for the job script's done marker ("yes" where it is there)
DONE = "done"


@dataclass
class Evidence:
    """What a work package left: the texts the model reads, by name."""

    texts: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    work_package: str = ""
    # the job's node_energy.json as read; None where no job folder was read
    node_energy: NodeEnergy | None = None

    def text(self, *names: str) -> str:
        return "\n".join(self.texts.get(n, "") for n in names)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def data_step(run_dir: Path, wp: jube_run.WorkPackage) -> dict[str, str]:
    """What the data step before a work package left, by name (data_errors)."""
    if not wp.parents:
        return {}
    texts: dict[str, str] = {}
    for data_dir in run_dir.glob(f"{wp.parents[0]:06d}_*/work"):
        texts = data_errors(data_dir)
    return texts


def data_errors(data_work: Path) -> dict[str, str]:
    """What the data step's work folder `data_work` left, by name: its errors
    (its failure is the row's) and its output (what it says of the data)."""
    return {"data.stderr": _read(data_work / "stderr"), "data.stdout": _read(data_work / "stdout")}


def job_texts(folder: Path, done_file: str) -> dict[str, str]:
    """What the job script (aux/job.sh.in) left in the folder it ran in,
    by name, whoever started it (JUBE or a ReFrame check): its logs from
    the last attempt on, its error and signal markers, the power guard's
    record of each node (caraml/job/power_guard.py) and whether its done
    marker, an empty file, is there."""
    texts = {name: _read(folder / name) for name in ("error", SIGNAL_FILE)}
    texts.update({name: last_attempt(_read(folder / name)) for name in ("job.out", "job.err")})
    texts["power_guard"] = "".join(_read(p) for p in sorted(folder.glob(f"{GUARD_FILES}*")))
    texts[DONE] = "yes" if (folder / done_file).exists() else ""
    return texts


def gather(execute_work: Path, jpwr_out: Path | None = None, jpwr_err: Path | None = None,
           jpwr_status: int | None = None) -> Evidence:
    """The evidence of one execute work package (and its combine step, where
    it ran)."""
    execute_work = execute_work.resolve()
    run_dir = execute_work.parents[1]
    wp = jube_run.work_packages(run_dir)[jube_run.work_package_id(execute_work)]
    texts = {name: _read(execute_work / name) for name in ("stderr", "stdout")}
    texts.update(job_texts(execute_work, wp.params.get("done_file") or "ready"))
    texts.update(data_step(run_dir, wp))
    if jpwr_out is not None:
        texts["jpwr"] = _read(jpwr_out)
        texts["jpwr.err"] = _read(jpwr_err) if jpwr_err else ""
        texts["jpwr.status"] = str(jpwr_status if jpwr_status is not None else 0)
    return Evidence(texts, wp.params, str(execute_work), node_energy(execute_work))


def node_energy(job_folder: Path) -> NodeEnergy:
    """The node energy the job script left in the folder it ran in (aux/job.sh.in)."""
    return read_node_energy(job_folder / NODE_ENERGY_FILE)
