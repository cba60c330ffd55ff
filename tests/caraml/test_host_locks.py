"""JUBE parses a run in its script's folder: the suite's `jube run`s take
that folder's turn only while JUBE parses (caraml/login/host_locks.py).
A stand-in for `jube run` (a Python child with JUBE's command line shape)
shows when the turn is given back."""

from __future__ import annotations

import subprocess
import sys

import pytest

from caraml.login.host_locks import jube_folder_lock, run_jube

# prints JUBE's banner, then takes the folder's lock itself (blocking): it
# can only end once the caller gave the lock back on hearing the banner
CHILD = """
import fcntl, sys
sys.stderr.write("x" * (1 << 20))  # more than a pipe holds
print("# id: 7", flush=True)
with open(sys.argv[3], "a") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
print("took the folder's turn", flush=True)
"""


def test_the_folder_is_given_back_once_jube_names_the_run(tmp_path):
    script = tmp_path / "bench.xml"
    lock = jube_folder_lock(script)
    done = run_jube([sys.executable, "-c", CHILD, "run", str(script), str(lock)], timeout=120)
    assert done.returncode == 0, done.stderr[-300:]
    assert done.stdout.splitlines() == ["# id: 7", "took the folder's turn"]
    assert len(done.stderr) == 1 << 20


def test_a_run_past_its_timeout_is_killed_and_its_output_kept(tmp_path):
    script = tmp_path / "bench.xml"
    with pytest.raises(subprocess.TimeoutExpired) as expired:
        run_jube([sys.executable, "-c", "import time; print('parsing', flush=True); time.sleep(600)",
                  "run", str(script)], timeout=2)
    assert expired.value.output == "parsing\n"
