"""The Slurm epilog (site/slurm-epilog-power-limits.sh) on a node whose
GPUs it cannot read: the vendor's Python binding missing for the epilog's
Python. A limit a job left there cannot be put back, so the epilog fails
and Slurm drains the node; a node without GPUs has nothing to put back.
The node's PCI bus is a fake sysfs tree (JPWR_SYSFS_ROOT); no binding is
importable (tests/fake_bindings without their state)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BINDINGS = ROOT / "tests" / "fake_bindings"


def _pci(root: Path, bus: str, vendor: str, kind: str) -> None:
    device = root / "bus" / "pci" / "devices" / bus
    device.mkdir(parents=True)
    (device / "vendor").write_text(f"{vendor}\n")
    (device / "class").write_text(f"{kind}\n")


def _epilog(sysfs: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CARAML_FAKE_NVML_STATE", "CARAML_FAKE_AMDSMI_STATE")}
    env.update(PYTHONPATH=os.pathsep.join([str(BINDINGS), str(ROOT)]), JPWR_SYSFS_ROOT=str(sysfs),
               CARAML_EPILOG_PYTHON=sys.executable)
    return subprocess.run(["sh", str(ROOT / "site" / "slurm-epilog-power-limits.sh")], env=env,
                          capture_output=True, text=True, timeout=120)


def test_gpus_whose_limits_cannot_be_read_fail_the_epilog(tmp_path):
    sysfs = tmp_path / "sys"
    _pci(sysfs, "0000:00:02.0", "0x1a03", "0x030000")   # the board's own VGA (ASPEED): no GPU
    _pci(sysfs, "0000:41:00.0", "0x10de", "0x030200")   # an NVIDIA GPU (3D controller)
    _pci(sysfs, "0000:c1:00.0", "0x10de", "0x030200")
    _pci(sysfs, "0000:05:00.0", "0x10de", "0x068000")   # an NVSwitch: no GPU
    done = _epilog(sysfs)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "devices=2 " in done.stdout and "reset=no" in done.stdout, done.stdout
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("CARAML ERROR: 2 GPUs on "), done.stderr
    assert "NVIDIA 0000:41:00.0" in errors[0] and "nvidia-ml-py" in errors[0]
    assert "Traceback" not in done.stderr


def test_a_node_without_gpus_has_nothing_to_put_back(tmp_path):
    sysfs = tmp_path / "sys"
    _pci(sysfs, "0000:00:02.0", "0x1a03", "0x030000")
    done = _epilog(sysfs)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "devices=0 " in done.stdout and done.stderr == ""
