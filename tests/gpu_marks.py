"""The mark of tests that need a GPU: selected with `-m gpu`
(`bash aux/run_tests.sh -m gpu` on a GPU node). Skipped with the reason on
a host without GPUs; failed, not skipped, on a host that lists GPUs that
torch does not see (a torch built for a newer CUDA than the driver's, a
CUDA torch on an AMD node, a CPU-only torch): there the GPU tests would
otherwise pass as skipped on exactly the node they are meant for. The
host's GPUs: NVIDIA's as `nvidia-smi -L` lists them, AMD's as `amd-smi
list` or `rocm-smi --showid` list them, else as the kernel's KFD topology
(/sys/class/kfd) has them where /dev/kfd exists, without any tool."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

SMI_TIMEOUT_S = 30
KFD_DEVICE = Path("/dev/kfd")
KFD_NODES = Path("/sys/class/kfd/kfd/topology/nodes")


def _tool_lines(*argv: str) -> list[str]:
    exe = shutil.which(argv[0])
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, *argv[1:]], capture_output=True, text=True,
                             timeout=SMI_TIMEOUT_S).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.splitlines()]


def _kfd_gpus(device: Path, nodes: Path) -> list[str]:
    """GPU nodes of the KFD topology (a CPU node has no SIMDs)."""
    if not device.exists():
        return []
    found = []
    for node in sorted(nodes.glob("*"), key=lambda p: int(p.name) if p.name.isdigit() else -1):
        try:
            properties = dict(line.split(None, 1) for line in
                              (node / "properties").read_text().splitlines() if " " in line)
        except OSError:
            continue
        if int(properties.get("simd_count", "0")) > 0:
            version = properties.get("gfx_target_version", "?")
            found.append(f"KFD node {node.name} (gfx_target_version {version})")
    return found


def listed_gpus(kfd_device: Path = KFD_DEVICE, kfd_nodes: Path = KFD_NODES) -> tuple[str, list[str]]:
    """(what lists them, the GPUs it lists) on this host; ("", []) without any."""
    nvidia = [line for line in _tool_lines("nvidia-smi", "-L") if line.startswith("GPU ")]
    if nvidia:
        return "nvidia-smi", nvidia
    amd = [line for line in _tool_lines("amd-smi", "list") if re.match(r"GPU: \d+$", line)]
    if amd:
        return "amd-smi", amd
    rocm = sorted({m.group(0) for line in _tool_lines("rocm-smi", "--showid")
                   if (m := re.match(r"GPU\[\d+\]", line))})
    if rocm:
        return "rocm-smi", rocm
    kfd = _kfd_gpus(kfd_device, kfd_nodes)
    return ("/dev/kfd", kfd) if kfd else ("", [])


def unseen_gpus_error(torch_sees_a_gpu: bool, listed: tuple[str, list[str]]) -> str | None:
    """Why the GPU tests must fail here, or None."""
    tool, gpus = listed
    if torch_sees_a_gpu or not gpus:
        return None
    return (f"{tool} lists {len(gpus)} GPU(s) ({gpus[0]}) but torch {torch.__version__} "
            f"(CUDA {torch.version.cuda}, ROCm {getattr(torch.version, 'hip', None)}) sees none; "
            f"a torch built for a newer CUDA than the driver's, one built for the other vendor's "
            f"GPUs, or a CPU-only torch: set up with the node's own torch (docs/setup.md)")


TORCH_SEES_A_GPU = torch.cuda.is_available()
UNSEEN_GPUS = unseen_gpus_error(TORCH_SEES_A_GPU, ("", []) if TORCH_SEES_A_GPU else listed_gpus())


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
