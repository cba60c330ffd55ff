"""The mark of tests that need a GPU: selected with `-m gpu`
(`bash aux/run_tests.sh -m gpu` on a GPU node). Skipped with the reason on
a host without GPUs; failed, not skipped, on a host whose nvidia-smi lists
GPUs that torch does not see (a torch built for a newer CUDA than the
driver's, a CPU-only torch): there the GPU tests would otherwise pass as
skipped on exactly the node they are meant for."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

NVIDIA_SMI_TIMEOUT_S = 30


def listed_gpus() -> list[str]:
    """The GPUs `nvidia-smi -L` lists on this host (none without nvidia-smi)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True,
                             timeout=NVIDIA_SMI_TIMEOUT_S).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.splitlines() if line.startswith("GPU ")]


def unseen_gpus_error(torch_sees_a_gpu: bool, listed: list[str]) -> str | None:
    """Why the GPU tests must fail here, or None."""
    if torch_sees_a_gpu or not listed:
        return None
    return (f"nvidia-smi lists {len(listed)} GPU(s) ({listed[0]}) but torch {torch.__version__} "
            f"(CUDA {torch.version.cuda}) sees none; a torch built for a newer CUDA than the "
            f"driver's, or a CPU-only torch: set up with the node's own torch (docs/setup.md)")


TORCH_SEES_A_GPU = torch.cuda.is_available()
UNSEEN_GPUS = unseen_gpus_error(TORCH_SEES_A_GPU, [] if TORCH_SEES_A_GPU else listed_gpus())


@pytest.fixture
def torch_sees_the_listed_gpus():
    if UNSEEN_GPUS:
        pytest.fail(UNSEEN_GPUS, pytrace=False)


requires_gpu = [
    pytest.mark.gpu,
    pytest.mark.skipif(not TORCH_SEES_A_GPU and not UNSEEN_GPUS,
                       reason="needs a CUDA or ROCm GPU and this host has none; "
                              "run on a GPU node: bash aux/run_tests.sh -m gpu"),
    pytest.mark.usefixtures("torch_sees_the_listed_gpus"),
]

# Where a test runs a driver: the GPU when there is one, so the tests exercise
# the path a user's figure comes from.
DEVICE = "cuda" if TORCH_SEES_A_GPU else "cpu"
