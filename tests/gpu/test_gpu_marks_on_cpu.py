"""The GPU tests' skip-or-fail logic on this CPU host, with a fake
nvidia-smi on PATH at the device boundary: where it lists a GPU that torch
does not see (as with a CUDA 13 torch on an older driver), the `-m gpu`
tests fail with the reason; where no GPU is listed they skip."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from tests import gpu_marks

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
H100 = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)"

pytestmark = pytest.mark.skipif(torch.cuda.is_available(),
                                reason="checks the fail-or-skip logic where torch sees no GPU")


@pytest.fixture
def fake_nvidia_smi(tmp_path):
    """A bin directory whose nvidia-smi prints `-L` output read from a file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    listing = tmp_path / "listing"
    exe = bin_dir / "nvidia-smi"
    exe.write_text('#!/bin/sh\n[ "$1" = "-L" ] && cat "$FAKE_NVIDIA_SMI_LISTING"\n')
    exe.chmod(0o755)

    def env(lines: list[str]) -> dict[str, str]:
        listing.write_text("".join(f"{line}\n" for line in lines))
        return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                "FAKE_NVIDIA_SMI_LISTING": str(listing)}
    return env


def test_listed_gpus_reads_nvidia_smi(fake_nvidia_smi, monkeypatch):
    env = fake_nvidia_smi([H100, "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)"])
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("FAKE_NVIDIA_SMI_LISTING", env["FAKE_NVIDIA_SMI_LISTING"])
    listed = gpu_marks.listed_gpus()
    assert listed[0] == H100 and len(listed) == 2
    error = gpu_marks.unseen_gpus_error(False, listed)
    assert error.startswith(f"nvidia-smi lists 2 GPU(s) ({H100}) but torch {torch.__version__}")
    assert gpu_marks.unseen_gpus_error(True, listed) is None
    assert gpu_marks.unseen_gpus_error(False, []) is None


def run_gpu_tests(env: dict[str, str]) -> subprocess.CompletedProcess:
    # test_gpu_energy.py: the shortest GPU test module, collected as on a GPU node
    return subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider",
                           "-q", "-rfs", "tests/gpu/test_gpu_energy.py"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_gpu_tests_fail_where_nvidia_smi_lists_a_gpu_torch_cannot_see(fake_nvidia_smi):
    proc = run_gpu_tests(fake_nvidia_smi([H100]))
    assert proc.returncode == 1, proc.stdout[-2000:]
    # the fixture fails the test in its set-up, which pytest counts as an error
    assert "1 error" in proc.stdout and "skipped" not in proc.stdout
    assert "nvidia-smi lists 1 GPU(s)" in proc.stdout and "sees none" in proc.stdout


def test_gpu_tests_skip_where_no_gpu_is_listed(fake_nvidia_smi):
    proc = run_gpu_tests(fake_nvidia_smi(["No devices were found"]))
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "1 skipped" in proc.stdout and "failed" not in proc.stdout
