"""Work packages whose rows were recorded (tests/caraml/data/recorded_rows.json)
by the row model as it stood before the row model was split and the
benchmark table introduced; test_recorded_rows.py checks that the row
model still decides and prints the same figures for each.

    python -m tests.caraml.recorded_rows   # records them anew (only when a change is meant)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.caraml.row_packages import (
    IMAGE_GLOBAL,
    JPWR,
    OPERATOR_GLOBAL,
    START,
    execute,
    finished_job,
    run_dir,
    write,
)

REPO = Path(__file__).resolve().parents[2]
RECORD = Path(__file__).with_name("data") / "recorded_rows.json"
_OPERATOR = {"row_benchmark": "operator", "problem": "rbc3d", "compile_mode": "default"}
_IMAGE = {"row_benchmark": "image"}
# name: (benchmark, parameters, the execute work package's files, jpwr's output)
CASES = {
    "llm-ok": ("llm", {}, {"job_out": finished_job()}, JPWR),
    "llm-stopped-early": ("llm", {}, {"job_out": finished_job(stop="signal SIGUSR1"),
                                      "signal": "SIGTERM\n"}, JPWR),
    "image-ok": ("image", _IMAGE, {"job_out": finished_job(global_line=IMAGE_GLOBAL)}, JPWR),
    "operator-ok": ("operator", _OPERATOR, {"job_out": finished_job(global_line=OPERATOR_GLOBAL)},
                    JPWR),
    "image-failed": ("image", _IMAGE, {"job_out": START + "\n",
                                       "stderr": "CARAML ERROR: out of memory at 64 samples\n"},
                     JPWR),
    "operator-queued": ("operator", _OPERATOR, {"stdout": "Submitted batch job 42\n"}, None),
    "llm-graphcore": ("llm", {"seq_length": "1024", "global_batch_used": "64", "device_kind": "ipu",
                              "peak_tflops": "GC200"},
                      {"job_out": f"{START}\nCARAML job: end=2026-11-24T05:10:00+00:00 status=0\n",
                       "job_err": "".join(f"step {i} of epoch 0, loss: 9.1, throughput: {v} "
                                          "samples/sec\n" for i, v in enumerate([0.5, 59.0, 60.0]))},
                      JPWR),
}


def decide(tmp: Path, name: str) -> dict:
    """The row.json and the printed lines of one case, as the combine step
    makes them (`python -m caraml.row` in the combine work package)."""
    benchmark, params, files, jpwr = CASES[name]
    run = run_dir(tmp, params)
    # the planner's job script marks an execute work package
    write(execute(run), job_sh="#!/bin/bash\n", **files)
    combine = run / "000002_combine" / "work"
    combine.mkdir(parents=True)
    (combine / "execute").symlink_to(execute(run))
    (combine / "jpwr.out").write_text(jpwr or "CARAML energy: none\n")
    (combine / "jpwr.err").write_text("")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "caraml.row", "--benchmark", benchmark,
                           "jpwr.out", "jpwr.err"], cwd=combine, env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    row = json.loads((combine / "row.json").read_text())
    row["work_package"] = str(Path(row["work_package"]).relative_to(tmp.resolve()))
    return {"row": row, "lines": done.stdout.splitlines()}


def main() -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        record = {name: decide(Path(tmp) / name, name) for name in CASES}
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
