"""The row of a job that ran outside JUBE (a ReFrame stage directory),
decided by the same row model as JUBE's combine step: jpwr combine folds the
energy files of all ranks, then caraml/row/decide.py decides the row from
the same texts (job.out, job.err, error, signal, the data step's output,
jpwr's output) and the parameters JUBE planned the work package with, and
the row joins the same results history (caraml/row/history.py).

    python -m caraml.row.standalone --benchmark image --params params.json STAGEDIR

writes energy_summary.csv, jpwr.out, jpwr.err and row.json into STAGEDIR
and prints the `CARAML row` lines."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from caraml import benchmarks, report
from caraml.row import history
from caraml.row.decide import decide_row
from caraml.row.evidence import Evidence, data_errors, job_texts, node_energy
from caraml.row.jube_lines import print_lines
from caraml.row.record import Row
from caraml.row.run import undecided


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def combine_energy(stage: Path, energy_dir: str) -> dict[str, str]:
    """jpwr combine over the job's energy files, as the combine step runs it."""
    out, err = stage / "jpwr.out", stage / "jpwr.err"
    if not (stage / energy_dir).is_dir():
        out.write_text("CARAML energy: none (the job wrote no energy files)\n")
        err.write_text("")
        status = 0
    else:
        with open(out, "w") as o, open(err, "w") as e:
            status = subprocess.run([sys.executable, "-m", "jpwr", "combine", "--out",
                                     str(stage / "energy_summary.csv"), str(stage / energy_dir)],
                                    cwd=stage, stdout=o, stderr=e, timeout=600).returncode
    return {"jpwr": _read(out), "jpwr.err": _read(err), "jpwr.status": str(status)}


def decide_stage(benchmark: str, params: dict[str, str], stage: Path) -> Row:
    texts = job_texts(stage, params.get("done_file") or "ready")
    # the data step ran in its own folder of the stage, named as its step (caraml/regression/plan.py)
    step = benchmarks.get(benchmark).data_step
    if step is not None:
        texts.update(data_errors(stage / step.step))
    texts.update(combine_energy(stage, params.get("energy_dir") or "energy"))
    return decide_row(benchmark, Evidence(texts, params, str(stage), node_energy(stage)),
                      slurm_state=None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caraml.row.standalone",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", required=True, help="its name in caraml/benchmarks.py")
    parser.add_argument("--params", required=True, type=Path,
                        help="the work package's parameters as JSON (what JUBE planned)")
    parser.add_argument("stage", type=Path, help="the folder the job ran in")
    args = parser.parse_args(argv)
    stage = args.stage.resolve()
    try:
        params = json.loads(args.params.read_text())
        if not isinstance(params, dict):
            raise ValueError("not a JSON object of parameter names and values")
        row = decide_stage(args.benchmark, {str(k): str(v) for k, v in params.items()}, stage)
    except (OSError, ValueError, KeyError, subprocess.SubprocessError) as error:
        row = undecided(args.benchmark, stage, error)
        report.error(f"{args.params}: {row.reason}")
    row = history.keep(row, stage)
    print_lines(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
