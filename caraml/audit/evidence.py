"""A row's raw evidence, as its run folder (or a bundle unpacked) holds it:
the row as it was written (row.json, its stated figures and verdict), and
in its execute work package the job's log (job.out: the job's start and
end), the system's platform.xml block the job was planned with
(system.json, caraml/login/systems.py) and the run's energy folder: jpwr's
files of every rank, provenance.json (the machine and the build) and
iterations.json (the timed iterations, losses and skips). A work package
is found by its folder's name in the run, so a run copied, moved or
bundled reads the same."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from caraml.login.systems import BLOCK_FILE
from caraml.node.iterations import FILE_NAME as ITERATIONS
from caraml.row import row_json
from caraml.row.record import Row

PROVENANCE = "provenance.json"
JOB_OUT = "job.out"


@dataclass(frozen=True)
class Evidence:
    """What one row rests on. `missing` says what of its raw evidence is
    not there ("" where all is); the row is then unaudited."""

    row_file: Path
    stated: dict
    row: Row
    work: Path | None = None
    energy: Path | None = None
    iterations: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    system: dict = field(default_factory=dict)
    job_out: str = ""
    missing: str = ""

    @property
    def run_dir(self) -> Path:
        return self.row_file.parents[2]


def _json(path: Path) -> dict:
    """A JSON object from path; ValueError naming the file where it is none."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{path}: not a readable JSON file ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a JSON {type(data).__name__}, not an object")
    return data


def work_package(row_file: Path, row: Row) -> Path | None:
    """The execute work package of a row, in the run that holds row_file."""
    if not row.work_package:
        return None
    work = row_file.parents[2] / Path(row.work_package).parent.name / "work"
    return work if work.is_dir() else None


def energy_folder(work: Path) -> Path | None:
    """The folder of the work package that holds its iterations.json (the run's energy folder)."""
    found = sorted(work.glob(f"*/{ITERATIONS}"))
    return found[0].parent if found else None


def read(row_file: Path) -> Evidence:
    """The row of row_file and what of its raw evidence its run holds;
    ValueError where row.json itself cannot be read."""
    stated = _json(row_file)
    row = row_json.read(row_file)
    work = work_package(row_file, row)
    energy = energy_folder(work) if work is not None else None
    if work is None or energy is None:
        where = "its work package" if work is None else f"{work}"
        return Evidence(row_file, stated, row, work, missing=f"no raw evidence: {where} holds no "
                        f"{ITERATIONS} (a run made before the suite kept its iterations, one without "
                        "energy, or a row written by hand)")
    iterations, provenance = _json(energy / ITERATIONS), _json(energy / PROVENANCE) \
        if (energy / PROVENANCE).is_file() else {}
    system = _json(work / BLOCK_FILE) if (work / BLOCK_FILE).is_file() else {}
    try:
        job_out = (work / JOB_OUT).read_text(errors="replace")
    except OSError:
        job_out = ""
    lacking = [name for name, found in ((PROVENANCE, provenance), (JOB_OUT, job_out)) if not found]
    missing = f"no raw evidence: {work} lacks {' and '.join(lacking)}" if lacking else ""
    return Evidence(row_file, stated, row, work, energy, iterations, provenance, system, job_out, missing)
