"""aux/gpu_check.sh on a host without a GPU, a fake nvidia-smi on PATH at
the device boundary: each step runs under its planned cap, a failing step
is said and the next one runs, a failed set-up leaves the rest recorded as
not run, TERM stops the running step and the summary and the archive still
hold every step, and a bad argument is one line. What it measures needs a
GPU node (docs/gpu_readiness.md); its plan is tests/setup/test_gpu_plan.py's."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_NVIDIA_SMI = """#!/bin/sh
# the queries gpu_check.sh makes, answered for one 700 W GPU; where the test
# names a process in TERM_PID, the bare call (the node step's first) sends
# it TERM, as the device's limit on a call would, and waits to be stopped
case "$*" in
    *power.limit*) echo "700.00" ;;
    *power.default_limit*) echo "700.00" ;;
    "") if [ -n "$TERM_PID" ]; then kill -TERM "$TERM_PID"; sleep 60; fi ;;
    *) echo "GPU 0: NVIDIA Fake (UUID: GPU-0)" ;;
esac
"""


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (fake / "nvidia-smi").chmod(0o755)
    return {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "TERM_PID": "", **extra}


def _check(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "aux" / "gpu_check.sh"), *args], env=_env(tmp_path, **env),
                          capture_output=True, text=True, timeout=600)


def _summary(out: Path) -> dict[str, str]:
    lines = (out / "summary.txt").read_text().splitlines()
    return {line.split()[0]: line.split(None, 1)[1] for line in lines}


def test_a_failing_step_is_said_and_the_summary_and_archive_hold_every_step(tmp_path):
    out, archive = tmp_path / "out", tmp_path / "check.tgz"
    done = _check(tmp_path, "--out", str(out), "--archive", str(archive), "--budget-s", "240",
                  "--steps", "energy")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = _summary(out)
    assert list(summary) == ["node", "setup", "energy"], summary
    assert summary["setup"].startswith("ok")
    # no NVML here: jpwr's pynvml method refuses, exit 2
    assert summary["energy"].startswith("failed (exit 2)"), summary
    assert "energy: failed (exit 2)" in done.stdout
    with tarfile.open(archive) as tar:
        assert {"./summary.txt", "./energy.log", "./setup.log"} <= set(tar.getnames())


def test_a_failed_set_up_leaves_every_later_step_recorded_as_not_run(tmp_path):
    out, archive = tmp_path / "out", tmp_path / "check.tgz"
    # the set-up refuses a wheelhouse that is no folder before it changes anything
    done = _check(tmp_path, "--out", str(out), "--archive", str(archive), "--budget-s", "400",
                  "--steps", "energy,power", CARAML_WHEELHOUSE=str(tmp_path / "none"))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = _summary(out)
    assert list(summary) == ["node", "setup", "energy", "power"], summary
    assert summary["setup"].startswith("failed (exit 1)")
    assert summary["energy"].startswith("not run (no set-up)")
    assert summary["power"].startswith("not run (no set-up)")
    with tarfile.open(archive) as tar:
        assert {"./summary.txt", "./setup.log", "./plan.txt"} <= set(tar.getnames())


def test_term_stops_the_running_step_and_the_archive_still_holds_every_step(tmp_path):
    """The fake nvidia-smi of the node step sends the script TERM: the step
    ends, the steps after it are recorded as not run, the archive is written"""
    out, archive = tmp_path / "out", tmp_path / "check.tgz"
    # the fake finds the script by its process id: the wrapper's, which exec keeps
    wrapper = tmp_path / "check.sh"
    wrapper.write_text('TERM_PID=$$ exec bash "$@"\n')
    done = subprocess.run(["bash", str(wrapper), str(ROOT / "aux" / "gpu_check.sh"), "--out", str(out),
                           "--archive", str(archive), "--budget-s", "300", "--steps", "energy"],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert done.returncode == 143, done.stdout + done.stderr
    summary = _summary(out)
    assert list(summary) == ["node", "setup", "energy"], summary
    assert summary["node"].startswith("stopped by TERM"), summary
    assert summary["setup"].startswith("not run (TERM)")
    assert summary["energy"].startswith("not run (TERM)")
    with tarfile.open(archive) as tar:
        assert {"./summary.txt", "./node.log", "./plan.txt"} <= set(tar.getnames())


def test_a_call_the_plan_lacks_is_one_line(tmp_path):
    done = _check(tmp_path, "--out", str(tmp_path / "out"), "--budget-s", "300", "--steps", "energy",
                  "--call", "2")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpu_check: the plan has no call 2 (it has 1); --plan-only prints it"]


def test_an_unknown_argument_is_one_line(tmp_path):
    done = _check(tmp_path, "--steps", "energy", "--fast")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpu_check: unknown argument '--fast' (--plan-only, --call N, --out DIR, --wheelhouse DIR, "
        "--archive FILE, --device-left-s N, --call-limit-s N, --start-s N, --steps LIST, --budget-s N)"]
