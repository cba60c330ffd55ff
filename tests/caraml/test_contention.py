"""Contention measured from outside the job: the CPU time of the processes
that are not the job's over the run. Silent where only the job itself
works (however busy it is), firing under a competing process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from caraml import provenance

TICK = os.sysconf("SC_CLK_TCK")


def fake_process(proc, pid, cpu_s, **environ):
    folder = proc / str(pid)
    folder.mkdir(parents=True, exist_ok=True)
    ticks = int(cpu_s * TICK)
    # pid (comm) state ppid ... utime stime: fields 14 and 15 of stat(5)
    (folder / "stat").write_text(f"{pid} (python3 x) R 1 " + "0 " * 9 + f"{ticks} 0 0 0\n")
    (folder / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in environ.items()))


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def job(monkeypatch):
    monkeypatch.setenv(provenance.JOB_KEY, "cn1-4242")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    return "cn1-4242"


def test_a_quiet_host_is_silent_however_busy_the_job_is(tmp_path, job):
    clock = Clock()
    window = provenance.ContentionWindow(tmp_path, clock)
    fake_process(tmp_path, 100, 5.0, CARAML_JOB=job)          # a rank
    fake_process(tmp_path, 101, 1.0, CARAML_JOB=job)          # its launcher
    fake_process(tmp_path, 300, 7.0)                          # an idle daemon
    window.begin()
    clock.now = 10.0
    fake_process(tmp_path, 100, 24.0, CARAML_JOB=job)         # both CPUs, all the run
    fake_process(tmp_path, 102, 3.0, CARAML_JOB=job)          # a worker it started
    assert window.end() == 0.0


def test_a_competitor_is_measured_in_its_share_of_the_host(tmp_path, job):
    clock = Clock()
    window = provenance.ContentionWindow(tmp_path, clock)
    fake_process(tmp_path, 100, 5.0, CARAML_JOB=job)
    fake_process(tmp_path, 200, 2.0, CARAML_JOB="cn1-9999")   # another job's rank
    window.begin()
    clock.now = 10.0
    fake_process(tmp_path, 100, 15.0, CARAML_JOB=job)
    fake_process(tmp_path, 200, 12.0, CARAML_JOB="cn1-9999")  # one CPU of two, all the run
    fake_process(tmp_path, 201, 1.0)                          # a newcomer, all of it counted
    assert window.end() == pytest.approx(100 * 11.0 / 20.0, rel=0.01)


def test_without_a_job_identity_nothing_is_claimed(tmp_path, monkeypatch):
    monkeypatch.delenv(provenance.JOB_KEY, raising=False)
    window = provenance.ContentionWindow(tmp_path)
    window.begin()
    assert window.end() is None


SPIN = "import time\nend = time.monotonic() + float({s})\nwhile time.monotonic() < end: pass\n"


def spin(seconds, **env):
    return subprocess.Popen([sys.executable, "-c", SPIN.format(s=seconds)],
                            env={**os.environ, **env})


def test_on_this_host_a_competing_process_fires_and_the_jobs_own_does_not(monkeypatch):
    monkeypatch.setenv(provenance.JOB_KEY, f"test-{os.getpid()}")
    window = provenance.ContentionWindow()
    window.begin()
    own = spin(1.5, CARAML_JOB=f"test-{os.getpid()}")
    other = spin(1.5, CARAML_JOB="someone-else")
    try:
        time.sleep(1.0)
        seen = provenance.foreign_cpu_seconds()
        assert str(other.pid) in seen and str(own.pid) not in seen
        other.wait(timeout=30)
        share = window.end()
    finally:
        for child in (own, other):
            child.kill()
            child.wait(timeout=30)
    # the competitor had at least a quarter of one CPU for most of the window
    assert share is not None and share >= 100 * 0.25 / (os.cpu_count() or 1)
