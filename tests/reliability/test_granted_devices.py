"""A granted GPU is the only GPU used: on hosts of two and four GPUs (a fake
nvidia-smi on PATH, a fake KFD topology, a fake NVML binding) LOCAL counts,
names and exports only the GPUs the host's visibility variables grant, and
jpwr measures only those, with CUDA's device order mapped onto NVML's."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from caraml.login import jobplan, local_host
from jpwr.gpu.pynvml import NvmlPower
from jpwr.gpu.rocm import RocmPower
from jpwr.method import MethodUnavailable
from tests.jpwr.jpwr_fakes import FakeAmdSmi, FakeNvml

VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
             "CUDA_DEVICE_ORDER", local_host.SELECT)
BASH = shutil.which("bash")  # the AMD host's PATH holds neither nvidia-smi nor rocm-smi
UUIDS = ["GPU-aaaa1111", "GPU-bbbb2222", "GPU-cccc3333", "GPU-dddd4444"]


@pytest.fixture
def host(tmp_path, monkeypatch):
    """host(names, mig_list="") puts a fake nvidia-smi on PATH that lists
    one GPU per name, in PCI bus order, and answers -L with mig_list."""
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(local_host, "KFD_NODES", tmp_path / "no-kfd")
    tool = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{tool}{os.pathsep}{os.environ['PATH']}")

    def make(names: list[str], mig_list: str = ""):
        fake_nvidia_smi(tool, names, [300 + 100 * i for i in range(len(names))], mig_list)
        return local_host.detect()
    return make


def fake_nvidia_smi(tool: Path, names: list[str], power_limits: list[float],
                    mig_list: str = "") -> None:
    """An nvidia-smi in the folder tool that lists one GPU per name, in PCI
    bus order, with its default power limit where the query asks for that
    (and 100 W, a leftover cap, where it asks for the limit set now), and
    answers -L with mig_list."""
    tool.mkdir(exist_ok=True)
    script = tool / "nvidia-smi"
    script.write_text('#!/bin/sh\nd=$(dirname "$0")\n'
                      'case "$*" in -L) cat "$d/list" ;; *power.default_limit*) cat "$d/query" ;;\n'
                      '*) sed "s/[0-9.]*$/100.00/" "$d/query" ;; esac\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (tool / "query").write_text("".join(
        f"00000000:{i + 1:02X}:00.0, {UUIDS[i]}, {name}, {limit:.2f}\n"
        for i, (name, limit) in enumerate(zip(names, power_limits, strict=True))))
    (tool / "list").write_text(mig_list)


def test_a_granted_gpu_is_the_one_counted_and_exported(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    found = host(["NVIDIA A100"] * 2)
    assert (found.found, local_host.value("visible_devices", found)) == (1, "1")
    assert local_host.value("default_power_limit", found) == "400"  # GPU 1's, not GPU 0's
    assert "granted by CUDA_VISIBLE_DEVICES=1" in local_host.value("description", found)
    with pytest.raises(ValueError, match=r"has 1 GPU granted \(CUDA_VISIBLE_DEVICES=1\)"):
        local_host.check(2, found)
    monkeypatch.setenv(local_host.SELECT, "1")
    assert local_host.value("visible_devices", local_host.detect()) == "1"


def test_caraml_local_devices_picks_among_the_granted_ones(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-cccc,3")
    monkeypatch.setenv(local_host.SELECT, "1")
    found = host(["NVIDIA H100"] * 4)
    assert found.found == 2
    assert local_host.value("visible_devices", found) == "GPU-cccc"
    assert local_host.value("devices", found) == "1"


def test_without_a_grant_every_gpu_is_used(host):
    found = host(["NVIDIA A100"] * 4)
    assert (found.found, found.visible()) == (4, "0,1,2,3")
    assert found.grant == ""


def test_mig_instances_are_devices_of_their_parent_gpu(host, monkeypatch):
    listing = ("GPU 0: NVIDIA A100 (UUID: GPU-aaaa1111)\n"
               "GPU 1: NVIDIA A100 (UUID: GPU-bbbb2222)\n"
               "  MIG 1g.10gb Device 0: (UUID: MIG-5555)\n"
               "  MIG 1g.10gb Device 1: (UUID: MIG-6666)\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-5555,MIG-GPU-bbbb2222/2/0")
    found = host(["NVIDIA A100"] * 2, listing)
    assert found.found == 2 and found.visible() == "MIG-5555,MIG-GPU-bbbb2222/2/0"
    assert found.default_limits_w == [400.0, 400.0]


@pytest.mark.parametrize("grant, named", [
    ("7", "'7'"), ("GPU-ffff", "'GPU-ffff'"), ("MIG-9999", "'MIG-9999'"), ("-1", "'-1'"),
])
def test_a_grant_that_names_no_gpu_of_the_host_is_refused_by_name(host, monkeypatch, grant, named):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", grant)
    with pytest.raises(ValueError, match=f"CUDA_VISIBLE_DEVICES={grant} names {named}, which "
                                         "is none of this host's 2 GPUs"):
        local_host.check(1, host(["NVIDIA A100"] * 2))


def test_an_empty_grant_is_refused(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError, match="grants none of this host's 2 GPUs"):
        local_host.check(1, host(["NVIDIA A100"] * 2))


def test_index_grants_on_mixed_gpus_need_the_pci_order(host, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with pytest.raises(ValueError, match="set CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        local_host.check(1, host(["NVIDIA A100", "NVIDIA T4"]))
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert local_host.detect().names == ["NVIDIA T4"]


def fake_kfd(tmp_path: Path, monkeypatch) -> None:
    """A KFD topology of a CPU (node 0) and four AMD GPUs, unique ids 1001..1004."""
    for node, simds in enumerate([0, 440, 440, 440, 440]):
        (tmp_path / "kfd" / str(node)).mkdir(parents=True)
        (tmp_path / "kfd" / str(node) / "properties").write_text(
            f"simd_count {simds}\nunique_id {1000 + node}\n")
    monkeypatch.setattr(local_host, "KFD_NODES", tmp_path / "kfd")


def test_amd_applies_rocr_then_hip_visible_devices(tmp_path, monkeypatch):
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    fake_kfd(tmp_path, monkeypatch)
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", f"1,GPU-{1004:016x},3")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")
    found = local_host.detect()
    assert (found.kind, found.found, found.visible()) == ("rocm", 1, "1")
    assert "ROCR_VISIBLE_DEVICES" in found.grant and "HIP_VISIBLE_DEVICES=1" in found.grant


# a grant of several GPUs reaches the job as it was given: LOCAL's value
# through JUBE (report.parameter), job.sh's export, and what torch and jpwr
# make of the exported variable

def job_sees(capsys) -> tuple[str, str]:
    """The device variable job.sh exports on this host and its value as
    bash sees it: LOCAL's values as JUBE gets them (what platform.xml's
    expand_tool prints), then the planner's export line."""
    facts = {"gpus_per_task": ""}
    for fact, what in (("device_kind", "kind"), ("devices_per_node", "devices"),
                       ("visible_devices", "visible_devices")):
        local_host.main([what])
        facts[fact] = capsys.readouterr().out
    line = jobplan.device_env(facts)
    name = jobplan.VISIBLE_DEVICES[facts["device_kind"]]
    shown = subprocess.run([BASH, "-c", f'{line}\nprintf %s "${name}"'], text=True,
                           capture_output=True, check=True, timeout=60).stdout
    return name, shown


def torch_parses(monkeypatch, name: str, value: str, hip: bool) -> list:
    """torch.cuda's own reading of the visibility variables (HIP's rules on a ROCm build)."""
    monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.version, "hip", "6.2" if hip else None)
    return torch.cuda._parse_visible_devices()


AMD_UUIDS = [f"{1000 + n:016x}" for n in range(1, 5)]
MIG_LISTING = ("GPU 0: NVIDIA A100 (UUID: GPU-aaaa1111)\nGPU 1: NVIDIA A100 (UUID: GPU-bbbb2222)\n"
               "GPU 2: NVIDIA A100 (UUID: GPU-cccc3333)\n"
               "  MIG 1g.10gb Device 0: (UUID: MIG-7777)\n  MIG 1g.10gb Device 1: (UUID: MIG-8888)\n"
               "GPU 3: NVIDIA A100 (UUID: GPU-dddd4444)\n")

def nvml(names=None, buses=None, migs=None) -> FakeNvml:
    gpus = []
    for i, uuid in enumerate(UUIDS):
        gpu = {"uuid": uuid, "power_mw": 100_000 * (i + 1), "energy_mj": 0,
               "name": (names or ["NVIDIA A100"] * 4)[i]}
        if buses:
            gpu["bus"] = buses[i]
        if migs and i in migs:
            gpu["migs"] = migs[i]
        gpus.append(gpu)
    return FakeNvml(gpus)


@pytest.fixture
def binding(monkeypatch):
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)

    def put(fake: FakeNvml) -> FakeNvml:
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake
    return put


def test_jpwr_counts_cuda_indices_in_pci_order_not_nvml_order(binding, monkeypatch):
    # NVML lists the GPU on bus 0x41 first; CUDA counts it second
    binding(nvml(buses=["0000:41:00.0", "0000:01:00.0", "0000:81:00.0", "0000:C1:00.0"]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert [c.device for c in NvmlPower().channels] == ["gpu1"]


def test_jpwr_refuses_to_guess_fastest_first_on_mixed_gpus(binding, monkeypatch):
    fake = binding(nvml(names=["NVIDIA A100", "NVIDIA T4", "NVIDIA A100", "NVIDIA T4"]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with pytest.raises(MethodUnavailable, match="set CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        NvmlPower()
    assert fake.initialised == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")  # a UUID needs no order
    assert [c.device for c in NvmlPower().channels] == ["gpu1"]


@pytest.mark.parametrize("grant", ["MIG-7777,MIG-8888", "MIG-GPU-cccc3333/1/0,MIG-GPU-cccc3333/2/0"])
def test_jpwr_measures_the_parent_gpu_of_mig_instances_once(binding, monkeypatch, grant):
    binding(nvml(migs={2: ["MIG-7777", "MIG-8888"], 3: ["MIG-9999"]}))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", grant)
    power = NvmlPower()
    assert [c.device for c in power.channels] == ["gpu2"]
    assert power.read() == pytest.approx([300.0])


def test_jpwr_names_a_mig_instance_that_is_nowhere(binding, monkeypatch):
    binding(nvml(migs={2: ["MIG-7777"]}))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-1234")
    with pytest.raises(MethodUnavailable, match="MIG instance 'MIG-1234' is on none of the GPUs"):
        NvmlPower()


@pytest.mark.jube
@pytest.mark.parametrize("gpus, grant, exported", [
    # CUDA_VISIBLE_DEVICES=1 and CARAML_LOCAL_DEVICES=1 once exported 0
    (2, {"CUDA_VISIBLE_DEVICES": "1", local_host.SELECT: "1"}, "1"),
    # every list of several GPUs once came out with semicolons
    (4, {}, "0,1,2,3"),
    (4, {"CUDA_VISIBLE_DEVICES": "2,3"}, "2,3"),
])
def test_a_jube_run_on_local_exports_the_granted_gpus(tmp_path, gpus, grant, exported):
    from tests.jube_runs import JubeRun

    tool = tmp_path / "bin"
    fake_nvidia_smi(tool, ["NVIDIA A100-SXM4-40GB"] * gpus, [400] * gpus)
    env = {**{k: v for k, v in os.environ.items() if k not in VARIABLES},
           "PATH": f"{tool}{os.pathsep}{os.environ['PATH']}", **grant}
    run = JubeRun("image_classification/image_classification_torch_benchmark.xml", tmp_path / "run",
                  env=env)
    run.run("LOCAL", "dryrun")
    scripts = [(work / "job.sh").read_text() for work in run.work_dirs("execute")]
    assert scripts and all(f"\nexport CUDA_VISIBLE_DEVICES={exported}\n" in s
                           for s in scripts), scripts[0]
    # the description is free text: its commas are semicolons
    assert all(("granted by CUDA_VISIBLE_DEVICES=" in s) == bool(grant) for s in scripts)


@pytest.mark.parametrize("grant, value, torch_sees, measured", [
    (None, "0,1,2,3", [0, 1, 2, 3], ["gpu0", "gpu1", "gpu2", "gpu3"]),
    ("2,3", "2,3", [2, 3], ["gpu2", "gpu3"]),
    ("3,0,1,2", "3,0,1,2", [3, 0, 1, 2], ["gpu3", "gpu0", "gpu1", "gpu2"]),
    ("GPU-cccc3333,GPU-dddd4444", "GPU-cccc3333,GPU-dddd4444", ["GPU-cccc3333", "GPU-dddd4444"],
     ["gpu2", "gpu3"]),
    ("GPU-aaaa1111,GPU-bbbb2222,GPU-cccc3333,GPU-dddd4444",
     "GPU-aaaa1111,GPU-bbbb2222,GPU-cccc3333,GPU-dddd4444", UUIDS, ["gpu0", "gpu1", "gpu2", "gpu3"]),
    ("MIG-7777,MIG-8888", "MIG-7777,MIG-8888", ["MIG-7777", "MIG-8888"], ["gpu2"]),
])
def test_a_cuda_grant_of_several_gpus_reaches_torch_and_jpwr_whole(
        host, binding, capsys, monkeypatch, grant, value, torch_sees, measured):
    if grant is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", grant)
    host(["NVIDIA A100"] * 4, MIG_LISTING)
    name, shown = job_sees(capsys)
    assert (name, shown) == ("CUDA_VISIBLE_DEVICES", value)
    assert torch_parses(monkeypatch, name, shown, hip=False) == torch_sees
    binding(nvml(migs={2: ["MIG-7777", "MIG-8888"]}))
    monkeypatch.setenv(name, shown)
    assert [c.device for c in NvmlPower().channels] == measured


@pytest.mark.parametrize("rocr, hip, value, torch_sees, measured", [
    (None, None, "0,1,2,3", [0, 1, 2, 3], ["gpu0", "gpu1", "gpu2", "gpu3"]),
    ("2,3", None, "0,1", [0, 1], ["gpu2", "gpu3"]),
    (f"GPU-{AMD_UUIDS[1]},GPU-{AMD_UUIDS[3]}", None, "0,1", [0, 1], ["gpu1", "gpu3"]),
    ("0,1,2,3", "3,2", "3,2", [3, 2], ["gpu3", "gpu2"]),
    (None, "1,2", "1,2", [1, 2], ["gpu1", "gpu2"]),
    (None, f"GPU-{AMD_UUIDS[0]},GPU-{AMD_UUIDS[2]}", f"GPU-{AMD_UUIDS[0]},GPU-{AMD_UUIDS[2]}",
     [f"GPU-{AMD_UUIDS[0]}", f"GPU-{AMD_UUIDS[2]}"], ["gpu0", "gpu2"]),
])
def test_a_rocm_grant_of_several_gpus_reaches_torch_and_jpwr_whole(
        tmp_path, capsys, monkeypatch, rocr, hip, value, torch_sees, measured):
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    fake_kfd(tmp_path, monkeypatch)
    for variable, grant in (("ROCR_VISIBLE_DEVICES", rocr), ("HIP_VISIBLE_DEVICES", hip)):
        if grant is not None:
            monkeypatch.setenv(variable, grant)
    name, shown = job_sees(capsys)
    assert (name, shown) == ("HIP_VISIBLE_DEVICES", value)
    # torch counts HIP's entries within ROCR's, as the runtime does
    assert torch_parses(monkeypatch, name, shown, hip=True) == torch_sees
    monkeypatch.setitem(sys.modules, "amdsmi", FakeAmdSmi([{"uuid": u} for u in AMD_UUIDS]))
    assert [c.device for c in RocmPower().channels] == measured
