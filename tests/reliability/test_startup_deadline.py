"""A rank missing at start-up ends the job at the stated deadline, not the
launcher's own grace later: a real two-rank torchrun job (gloo) whose
rank 1 is stopped (SIGSTOP) before it joins. The rank that came names it
and ends it there and then; torchrun, which would give a process 30 s to
take its TERM (a stopped one never does) before it kills it, finds it gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.reliability.test_startup_timeout import STOPPED_RANK

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 5
# torchrun's wait for a process to take its TERM before it kills it (its
# SubprocessContext's close): what the job must not wait for on top
LAUNCHER_GRACE_S = 30


def test_a_rank_stopped_at_start_up_ends_with_the_deadline_not_the_launchers_grace(tmp_path):
    script = tmp_path / "stopped_rank.py"
    script.write_text(STOPPED_RANK)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               str(script), "--train-iters", "3", "--device", "cpu", "--energy-methods", "none",
               "--startup-timeout-s", str(TIMEOUT_S)]
    with subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as job:
        said, named_at = [], None
        for line in job.stderr:
            said.append(line)
            if named_at is None and "CARAML ERROR: rank 1 " in line:
                named_at = time.monotonic()
        status = job.wait(timeout=600)
        ended_at = time.monotonic()
    stderr = "".join(said)
    assert status != 0 and named_at is not None, stderr[-3000:]
    # the stopped rank was gone before torchrun's close: it never had to kill it after its grace
    assert "forcefully exiting via" not in stderr, stderr[-3000:]
    late = ended_at - named_at
    assert late < LAUNCHER_GRACE_S, f"the job ended {late:.0f} s after the deadline"
