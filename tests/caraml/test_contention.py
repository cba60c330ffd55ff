"""Contention measured from outside the job: the host's CPU time less the
job's own over the run. Silent where only the job itself works (however
busy it is, whatever it starts and ends), counting a competitor's
processes even where each lived and ended inside the window.

The arithmetic runs on fake /proc files. On this shared host a quiet
figure cannot be asserted (other people's work is a competitor too), so
the live test puts a bounded competing load of short-lived processes beside
a job of the same kind and checks the figure against measurements made
from the other side: the kernel's resource usage of the job and of the
competitor."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from caraml.node import provenance

TICK = os.sysconf("SC_CLK_TCK")


class FakeProc:
    """A /proc with a host's cpu line and processes' stat and environ."""

    def __init__(self, root):
        self.root = root
        self.busy = self.idle = 0

    def host(self, busy_s: float, idle_s: float) -> None:
        # cpu user nice system idle iowait irq softirq steal guest guest_nice
        self.busy, self.idle = int(busy_s * TICK), int(idle_s * TICK)
        user, system = self.busy - self.busy // 4, self.busy // 4
        (self.root / "stat").write_text(
            f"cpu  {user} 0 {system} {self.idle} 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")

    def process(self, pid: int, cpu_s: float, children_s: float = 0.0, **environ) -> None:
        folder = self.root / str(pid)
        folder.mkdir(parents=True, exist_ok=True)
        ticks, reaped = int(cpu_s * TICK), int(children_s * TICK)
        # pid (comm) state ppid ... utime stime cutime cstime: fields 14 to 17 of proc(5)
        (folder / "stat").write_text(f"{pid} (python3 x) R 1 " + "0 " * 9
                                     + f"{ticks} 0 {reaped} 0 20 0\n")
        (folder / "environ").write_bytes(b"".join(f"{k}={v}\0".encode()
                                                  for k, v in environ.items()))

    def gone(self, pid: int) -> None:
        for f in (self.root / str(pid)).iterdir():
            f.unlink()
        (self.root / str(pid)).rmdir()


@pytest.fixture
def job(monkeypatch):
    monkeypatch.setenv(provenance.JOB_KEY, "cn1-4242")
    return "cn1-4242"


def test_a_quiet_host_is_silent_however_busy_the_job_is(tmp_path, job):
    proc = FakeProc(tmp_path)
    proc.host(busy_s=100.0, idle_s=900.0)
    proc.process(100, 5.0, CARAML_JOB=job)                    # a rank
    proc.process(101, 1.0, CARAML_JOB=job)                    # its launcher
    proc.process(300, 7.0)                                    # an idle daemon
    window = provenance.ContentionWindow(tmp_path)
    window.begin()
    # 10 s on 2 CPUs: the rank uses both, and a compiler it started and
    # waited for (gone now: in the rank's cutime) ran 2 s
    proc.host(busy_s=120.0, idle_s=900.0)
    proc.process(100, 23.0, children_s=2.0, CARAML_JOB=job)
    assert window.end() == 0.0


def test_a_competitors_short_lived_processes_count_though_none_is_left(tmp_path, job):
    proc = FakeProc(tmp_path)
    proc.host(busy_s=100.0, idle_s=900.0)
    proc.process(100, 5.0, CARAML_JOB=job)
    proc.process(200, 2.0, CARAML_JOB="cn1-9999")             # another job's rank
    window = provenance.ContentionWindow(tmp_path)
    window.begin()
    # 10 s on 2 CPUs (20 s of CPU): the job 10 s; the other job's rank 3 s and
    # then it ended; processes that began and ended in the window 4 s
    proc.host(busy_s=100.0 + 10.0 + 3.0 + 4.0, idle_s=900.0 + 3.0)
    proc.process(100, 15.0, CARAML_JOB=job)
    proc.gone(200)
    assert window.end() == pytest.approx(100 * 7.0 / 20.0, abs=0.1)


def test_the_jobs_children_that_ended_are_its_own(tmp_path, job):
    proc = FakeProc(tmp_path)
    proc.host(busy_s=10.0, idle_s=10.0)
    proc.process(100, 1.0, CARAML_JOB=job)
    proc.process(101, 1.0, children_s=0.5, CARAML_JOB=job)    # a data loader of the rank
    window = provenance.ContentionWindow(tmp_path)
    window.begin()
    # the loader ended and was waited for: its 1.5 s (and its own child's) are in the rank's cutime
    proc.gone(101)
    proc.process(100, 4.0, children_s=1.5 + 1.0, CARAML_JOB=job)
    proc.host(busy_s=10.0 + 3.0 + 1.0, idle_s=10.0 + 1.0)
    assert window.end() == pytest.approx(0.0, abs=0.1)


def test_without_a_job_identity_or_proc_nothing_is_claimed(tmp_path, monkeypatch):
    monkeypatch.delenv(provenance.JOB_KEY, raising=False)
    proc = FakeProc(tmp_path)
    proc.host(busy_s=1.0, idle_s=1.0)
    window = provenance.ContentionWindow(tmp_path)
    window.begin()
    assert window.end() is None
    monkeypatch.setenv(provenance.JOB_KEY, "cn1-1")
    (tmp_path / "stat").unlink()
    window.begin()
    assert window.end() is None


# A process that keeps starting short-lived CPU-bound children (each about
# 20 ms of a shell loop) for `seconds`, then reports its own CPU time and its
# children's as the kernel counts them; with `idle` it then waits on stdin.
WORKER = """
import resource, subprocess, sys, time
seconds, idle = float(sys.argv[1]), sys.argv[2] == "idle"
end = time.monotonic() + seconds
while time.monotonic() < end:
    subprocess.run(["sh", "-c", "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done"], check=True)
own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, flush=True)
if idle:
    sys.stdin.read()
"""


def worker(seconds: float, idle: bool, job: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WORKER, str(seconds), "idle" if idle else "end"],
                            env={**os.environ, provenance.JOB_KEY: job}, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def _children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def test_on_this_host_a_load_of_short_lived_processes_is_measured(monkeypatch):
    """Both the job and the competitor do their work in processes of about
    20 ms each. The figure must hold the competitor's share (measured by the
    kernel on the competitor's side) and agree within 10 points with the
    host's busy time less the job's own CPU as the job's kernel accounting
    has it. This test process belongs to neither: its share is the
    background, as other people's work on this shared host is."""
    job = f"test-job-{os.getpid()}"
    monkeypatch.setenv(provenance.JOB_KEY, job)
    window = provenance.ContentionWindow()
    host_before = provenance.host_cpu_ticks()
    children_before = _children_cpu_s()
    window.begin()
    own = worker(2.5, idle=True, job=job)      # the job: alive when the window closes
    other = worker(2.5, idle=False, job="someone-else")
    try:
        own_cpu_s = float(own.stdout.readline())    # the job's work is done
        other.wait(timeout=120)                      # reaped: in this test's children's time
        competitor_s = _children_cpu_s() - children_before
        share = window.end()
        host_after = provenance.host_cpu_ticks()
    finally:
        for child in (own, other):
            child.kill()
            child.wait(timeout=30)
    busy, total = ((b - a) / TICK for a, b in zip(host_before, host_after))
    independent = 100 * (busy - own_cpu_s) / total
    competitor = 100 * competitor_s / total
    assert share is not None
    assert share >= competitor - 10, (share, competitor)
    assert abs(share - independent) <= 10, (share, independent, competitor)


class TwoHosts:
    """Four ranks on two hosts, as Dist offers them to the report: every
    rank's float, gathered."""

    def __init__(self, rank: int, shares: list[float]):
        self.rank, self.is_main, self.shares = rank, rank == 0, shares

    def gather_floats(self, values):
        return [[s] for s in self.shares]


def test_every_host_of_the_job_is_measured_and_the_busiest_flags_the_row(monkeypatch, capsys):
    hostnames = ["cn1", "cn1", "cn2", "cn2"]
    monkeypatch.setattr(provenance._RUN_WINDOW, "end", lambda: 3.0)
    # ranks 0 and 2 measure their hosts; 1 and 3 share theirs and send nan
    assert provenance.report_load_at_end(TwoHosts(0, [3.0, float("nan"), 41.5, float("nan")]),
                                         hostnames) == 41.5
    line = capsys.readouterr().out
    assert "foreign_cpu_pct=41.5 foreign_cpu_pct_by_host=cn1=3.0;cn2=41.5" in line
    # a host that could not measure leaves the job's figure unknown, not low
    assert provenance.report_load_at_end(TwoHosts(0, [3.0, float("nan"), float("nan"), float("nan")]),
                                         hostnames) is None
    assert "foreign_cpu_pct=- foreign_cpu_pct_by_host=cn1=3.0" in capsys.readouterr().out
    # the other ranks print nothing and know the job's figure as rank 0 does
    # (the LLM driver's summary refuses a measured peak from it)
    assert provenance.report_load_at_end(TwoHosts(2, [3.0, float("nan"), 41.5, float("nan")]),
                                         hostnames) == 41.5
    assert capsys.readouterr().out == ""
