"""A rank that hangs at start-up does not hang the job: a real two-rank
torchrun job (gloo) whose rank 1 is stopped (SIGSTOP) before it joins.
Rank 0 stops past --startup-timeout-s with one line naming rank 1, torchrun
ends the stopped rank, and the row's cause (caraml/job/failure.py) names it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from caraml.job import failure

ROOT = Path(__file__).resolve().parents[2]

# the tiny benchmark's driver, with rank 1 stopped as it starts, as by a
# debugger or a node that stops scheduling it
STOPPED_RANK = """
import os, runpy, signal, sys
if os.environ["RANK"] == "1":
    os.kill(os.getpid(), signal.SIGSTOP)
sys.argv[0] = "driver"
runpy.run_module("tests.tiny_benchmark.driver", run_name="__main__")
"""


def test_a_rank_stopped_at_start_up_is_named_and_the_job_ends(tmp_path):
    script = tmp_path / "stopped_rank.py"
    script.write_text(STOPPED_RANK)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # bounded: rank 0 waits 5 s for rank 1, then torchrun gives the stopped
    # rank 30 s before SIGKILL; without the deadline gloo waits 30 minutes
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node=2", str(script),
                           "--train-iters", "3", "--device", "cpu", "--energy-methods", "none",
                           "--startup-timeout-s", "5"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if "CARAML ERROR:" in line]
    assert len(errors) == 1, done.stderr[-3000:]
    assert errors[0].endswith(f"CARAML ERROR: rank 1 (on {socket.gethostname()}) of 2 did not come "
                              "within 5 s (--startup-timeout-s): stopped or stuck or gone (or its "
                              "node never started it); the ranks that came stop here"), errors
    log = tmp_path / "job.err"
    log.write_text(done.stderr)
    row_cause = failure.summary(1, [log])
    assert row_cause == "job exited with status 1: " + errors[0].split("CARAML ERROR: ")[1], row_cause
