"""The LOCAL system's view of this host, with a fake nvidia-smi on PATH at
the device boundary: what it finds, what it says when the driver is broken,
and that a job asking for more devices than there are is refused with both
numbers."""

import os
import stat

import pytest

from caraml.login import local_host
from caraml.login.local_host import Host


def fake_nvidia_smi(directory, output: str, status: int = 0):
    """An nvidia-smi that prints output, its last column (the power limit)
    420 W where the query asks for the limit set now, not the default."""
    script = directory / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncase \"$*\" in *power.default_limit*) printf '%s' '{output}' ;;\n"
                      f"*) printf '%s' '{output}' | sed 's/[0-9.]*$/420.00/' ;; esac\nexit {status}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return directory


@pytest.fixture
def no_amd(monkeypatch, tmp_path):
    monkeypatch.setattr(local_host, "KFD_NODES", tmp_path / "no-kfd")
    monkeypatch.delenv(local_host.SELECT, raising=False)
    for variable in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        monkeypatch.delenv(variable, raising=False)


def test_nvidia_gpus_are_found_with_names_and_default_power_limits(tmp_path, monkeypatch, no_amd):
    out = ("00000000:01:00.0, GPU-aaaa, NVIDIA H100 80GB HBM3, 700.00\n"
           "00000000:02:00.0, GPU-bbbb, NVIDIA H100 80GB HBM3, 700.00\n")
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi(tmp_path, out)}{os.pathsep}{os.environ['PATH']}")
    host = local_host.detect()
    assert (host.kind, host.found, host.requested) == ("cuda", 2, 2)
    # LOCAL's TDP: the default limit, not a cap left at 420 W
    assert local_host.value("default_power_limit", host) == "700"
    assert local_host.value("unit", host) == "GPU"
    assert "2x NVIDIA H100 80GB HBM3" in local_host.value("description", host)
    local_host.check(2, host)


def test_a_broken_driver_is_named_and_not_taken_for_a_cpu_host(tmp_path, monkeypatch, no_amd):
    said = "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver. Make sure"
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi(tmp_path, said, 9)}{os.pathsep}{os.environ['PATH']}")
    host = local_host.detect()
    with pytest.raises(ValueError, match=r"nvidia-smi fails \(NVIDIA-SMI has failed because it "
                                         r"could not communicate with the NVIDIA driver\): the "
                                         r"NVIDIA driver of this host does not work"):
        local_host.check(1, host)


def test_no_accelerator_is_a_cpu_host_of_one_device(monkeypatch, tmp_path, no_amd):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi, no rocm-smi
    host = local_host.detect()
    assert (host.kind, host.found, local_host.value("unit", host)) == ("cpu", 1, "host")
    local_host.check(1, host)


def test_amd_gpus_are_counted_from_the_kfd_topology(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(local_host.SELECT, raising=False)
    for node, simds in enumerate([0, 440, 440]):  # the CPU node has no SIMD units
        (tmp_path / "kfd" / str(node)).mkdir(parents=True)
        (tmp_path / "kfd" / str(node) / "properties").write_text(
            f"cpu_cores_count 0\nsimd_count {simds}\nmem_banks_count 1\n")
    monkeypatch.setattr(local_host, "KFD_NODES", tmp_path / "kfd")
    host = local_host.detect()
    assert (host.kind, host.found) == ("rocm", 2)


@pytest.mark.parametrize("host, asked, numbers", [
    (Host("cuda", ["NVIDIA A100-SXM4-40GB"] * 4), 8, ("8 devices", "4 GPUs")),
    (Host("cpu"), 2, ("2 devices", "no accelerator")),
])
def test_asking_for_more_devices_than_the_host_has_names_both_numbers(host, asked, numbers):
    with pytest.raises(ValueError) as err:
        local_host.check(asked, host)
    assert all(n in str(err.value) for n in numbers)
    assert local_host.SELECT in str(err.value)


def test_a_subset_of_the_devices_can_be_chosen(monkeypatch):
    monkeypatch.setenv(local_host.SELECT, "3")
    host = Host("cuda", ["NVIDIA H200"] * 8)
    assert local_host.value("devices", host) == "3"
    assert "(3 used)" in local_host.value("description", host)
