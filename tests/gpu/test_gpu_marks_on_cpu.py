"""The GPU tests' skip-or-fail logic on this CPU host, with a fake
nvidia-smi, amd-smi or rocm-smi on PATH and a fake KFD topology at the
device boundary: where one lists a GPU that torch does not see (as with a
CUDA 13 torch on an older driver, or a CUDA torch on an AMD node), the
`-m gpu` tests fail with the reason; where no GPU is listed they skip."""

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


AMD_SMI = ["GPU: 0", "    BDF: 0000:05:00.0", "    UUID: 00ff74a1-0000-1000-8000-000000000000",
           "GPU: 1", "    BDF: 0000:26:00.0", "    UUID: 01ff74a1-0000-1000-8000-000000000000"]
ROCM_SMI = ["============ ROCm System Management Interface ============",
            "GPU[0]\t\t: Device Name: \t\tAMD Instinct MI300X",
            "GPU[0]\t\t: Device ID: \t\t0x74a1", "GPU[1]\t\t: Device ID: \t\t0x74a1"]


@pytest.fixture
def fake_smi(tmp_path):
    """A bin directory where the named tool (nvidia-smi, amd-smi, rocm-smi)
    prints the given lines, whatever its arguments, and the others nothing
    (so that a host's own tools further down PATH are not asked)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    listing = tmp_path / "listing"

    def env(tool: str, lines: list[str]) -> dict[str, str]:
        for name in ("nvidia-smi", "amd-smi", "rocm-smi"):
            exe = bin_dir / name
            exe.write_text('#!/bin/sh\ncat "$FAKE_SMI_LISTING"\n' if name == tool else "#!/bin/sh\n")
            exe.chmod(0o755)
        listing.write_text("".join(f"{line}\n" for line in lines))
        return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                "FAKE_SMI_LISTING": str(listing)}
    return env


@pytest.mark.parametrize("tool, lines, first, count", [
    ("nvidia-smi", [H100, "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)"], H100, 2),
    ("amd-smi", AMD_SMI, "GPU: 0", 2),
    ("rocm-smi", ROCM_SMI, "GPU[0]", 2),
])
def test_listed_gpus_reads_the_vendors_tools(fake_smi, monkeypatch, tool, lines, first, count):
    env = fake_smi(tool, lines)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("FAKE_SMI_LISTING", env["FAKE_SMI_LISTING"])
    listed = gpu_marks.listed_gpus()
    assert listed[0] == tool and listed[1][0] == first and len(listed[1]) == count
    error = gpu_marks.unseen_gpus_error(False, listed)
    assert error.startswith(f"{tool} lists {count} GPU(s) ({first}) but torch {torch.__version__}")
    assert gpu_marks.unseen_gpus_error(True, listed) is None
    assert gpu_marks.unseen_gpus_error(False, ("", [])) is None


def test_an_amd_node_without_tools_is_known_by_its_kfd_topology(tmp_path):
    device, nodes = tmp_path / "kfd", tmp_path / "nodes"
    for node, simds in (("0", 0), ("1", 304), ("2", 304)):   # the CPU, two MI300X
        (nodes / node).mkdir(parents=True)
        (nodes / node / "properties").write_text(
            f"cpu_cores_count {0 if simds else 96}\nsimd_count {simds}\n"
            f"gfx_target_version {90402 if simds else 0}\n")
    assert gpu_marks.listed_gpus(device, nodes) == ("", [])   # no /dev/kfd: no driver
    device.write_text("")
    tool, gpus = gpu_marks.listed_gpus(device, nodes)
    assert tool == "/dev/kfd" and gpus == ["KFD node 1 (gfx_target_version 90402)",
                                           "KFD node 2 (gfx_target_version 90402)"]


def run_gpu_tests(env: dict[str, str]) -> subprocess.CompletedProcess:
    # test_gpu_energy.py: the shortest GPU test module, collected as on a GPU node
    return subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider",
                           "-q", "-rfs", "tests/gpu/test_gpu_energy.py"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("tool, lines", [("nvidia-smi", [H100]), ("amd-smi", AMD_SMI[:3])])
def test_gpu_tests_fail_where_a_gpu_is_listed_that_torch_cannot_see(fake_smi, tool, lines):
    proc = run_gpu_tests(fake_smi(tool, lines))
    assert proc.returncode == 1, proc.stdout[-2000:]
    # the fixture fails the test in its set-up, which pytest counts as an error
    assert "1 error" in proc.stdout and "skipped" not in proc.stdout
    assert f"{tool} lists 1 GPU(s)" in proc.stdout and "sees none" in proc.stdout


def test_gpu_tests_skip_where_no_gpu_is_listed(fake_smi):
    proc = run_gpu_tests(fake_smi("nvidia-smi", ["No devices were found"]))
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "1 skipped" in proc.stdout and "failed" not in proc.stdout
