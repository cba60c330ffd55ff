"""aux/gpu_check.sh on a host without a GPU, a fake nvidia-smi on PATH at
the device boundary: each step runs under its cap and budget, a failing
step is said and the next one runs, the summary and the archive hold
every step, and a bad argument is one line. What it measures needs a GPU
node (docs/gpu_readiness.md)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_NVIDIA_SMI = """#!/bin/sh
# the queries gpu_check.sh makes, answered for one 700 W GPU
case "$*" in
    *power.limit*) echo "700.00" ;;
    *power.default_limit*) echo "700.00" ;;
    *) echo "GPU 0: NVIDIA Fake (UUID: GPU-0)" ;;
esac
"""


def _check(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (fake / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(ROOT / "aux" / "gpu_check.sh"), *args], env=env,
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


def test_steps_past_the_budget_are_not_run_and_say_so(tmp_path):
    out = tmp_path / "out"
    done = _check(tmp_path, "--out", str(out), "--budget-s", "10", "--steps", "energy")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = _summary(out)
    assert summary["node"].startswith("not run (budget spent)"), summary
    # without a set-up nothing that needs it runs
    assert list(summary) == ["node", "setup"]


def test_an_unknown_argument_is_one_line(tmp_path):
    done = _check(tmp_path, "--steps", "energy", "--fast")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gpu_check: unknown argument '--fast' (--out DIR, --wheelhouse DIR, --archive FILE, "
        "--budget-s N, --steps LIST)"]
