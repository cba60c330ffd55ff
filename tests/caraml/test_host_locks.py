"""JUBE parses a run in its script's folder: the suite's `jube run`s take
that folder's turn only while JUBE parses (caraml/login/host_locks.py).
A stand-in for `jube run` (a Python child with JUBE's command line shape)
shows when the turn is given back."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import threading

import pytest

from caraml.login.host_locks import held, jube_folder_lock, run_jube

# prints JUBE's banner, then takes the folder's lock itself (blocking): it
# can only end once the caller gave the lock back on hearing the banner
CHILD = """
import sys
from pathlib import Path
from caraml.login.host_locks import held
sys.stderr.write("x" * (1 << 20))  # more than a pipe holds
print("# id: 7", flush=True)
with held(Path(sys.argv[3])):
    print("took the folder's turn", flush=True)
"""


def test_the_folder_is_given_back_once_jube_names_the_run(tmp_path):
    script = tmp_path / "bench.xml"
    lock = jube_folder_lock(script)
    done = run_jube([sys.executable, "-c", CHILD, "run", str(script), str(lock)], timeout=120)
    assert done.returncode == 0, done.stderr[-300:]
    assert done.stdout.splitlines() == ["# id: 7", "took the folder's turn"]
    assert len(done.stderr) == 1 << 20


def test_no_lock_file_outlives_its_run(tmp_path):
    script = tmp_path / "bench.xml"
    done = run_jube([sys.executable, "-c", "print('# id: 3', flush=True)", "run", str(script)],
                    timeout=120)
    assert done.returncode == 0, done.stderr
    assert not jube_folder_lock(script).exists()


def test_a_lock_removed_on_release_still_lets_one_holder_in_at_a_time(tmp_path):
    lock = tmp_path / "turn.lock"
    b_holds, b_may_go = threading.Event(), threading.Event()

    def second() -> None:
        with held(lock):  # waits for the first holder, who removes the file as it releases
            b_holds.set()
            assert b_may_go.wait(timeout=60)

    with held(lock) as release:
        waiter = threading.Thread(target=second)
        waiter.start()
        release()
        assert b_holds.wait(timeout=60)
        # a third taker finds the file at the path held by the second
        with open(lock, "a") as third, pytest.raises(BlockingIOError):
            fcntl.flock(third, fcntl.LOCK_EX | fcntl.LOCK_NB)
        b_may_go.set()
        waiter.join(timeout=60)
    assert not waiter.is_alive() and not lock.exists()


def test_a_run_past_its_timeout_is_killed_and_its_output_kept(tmp_path):
    script = tmp_path / "bench.xml"
    with pytest.raises(subprocess.TimeoutExpired) as expired:
        run_jube([sys.executable, "-c", "import time; print('parsing', flush=True); time.sleep(600)",
                  "run", str(script)], timeout=2)
    assert expired.value.output == "parsing\n"
