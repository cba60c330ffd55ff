"""pynvml, rocm and gc against fake bindings injected into sys.modules."""

import math

import pytest
from jpwr_fakes import FakeAmdSmi, FakeGcIpuInfo, FakeNvml, FakeRocml

from jpwr.gpu.pynvml import NvmlPower
from jpwr.gpu.rocm import RocmPower
from jpwr.ipu.gc import IpuPower, watts
from jpwr.method import MethodUnavailable

UUIDS = ["GPU-aaaa1111-0000", "GPU-bbbb2222-0000", "GPU-cccc3333-0000", "GPU-dddd4444-0000"]


def nvml_gpus(n=4):
    return [{"uuid": UUIDS[i], "power_mw": 100_000 * (i + 1), "energy_mj": 1_000_000 * (i + 1)}
            for i in range(n)]


def test_pynvml_reads_watts_of_every_gpu_without_visibility_limits(install):
    install("pynvml", FakeNvml(nvml_gpus()))
    nvml = NvmlPower()
    assert [c.device for c in nvml.channels] == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert nvml.channels[1].info == UUIDS[1]
    assert nvml.read() == pytest.approx([100.0, 200.0, 300.0, 400.0])


@pytest.mark.parametrize("visible, expected", [
    ("2,0", ["gpu2", "gpu0"]),
    ("GPU-cccc3333-0000", ["gpu2"]),
    ("GPU-dddd", ["gpu3"]),               # abbreviated UUID, as CUDA allows
    ("bbbb2222,3", ["gpu1", "gpu3"]),
])
def test_pynvml_measures_only_the_gpus_of_cuda_visible_devices(install, monkeypatch,
                                                                visible, expected):
    install("pynvml", FakeNvml(nvml_gpus()))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert [c.device for c in NvmlPower().channels] == expected


@pytest.mark.parametrize("visible, message", [
    ("7", "names device 7, but only 4"),
    ("GPU-eeee", "matches 0 of the GPUs"),
    ("", "no NVIDIA GPU visible"),
])
def test_pynvml_visibility_that_matches_nothing_is_an_error(install, monkeypatch, visible, message):
    fake = FakeNvml(nvml_gpus())
    install("pynvml", fake)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with pytest.raises(MethodUnavailable, match=message):
        NvmlPower()
    assert fake.initialised == 0  # NVML was shut down again


def test_pynvml_energy_counter_in_joules(install):
    fake = FakeNvml(nvml_gpus(2))
    install("pynvml", fake)
    nvml = NvmlPower()
    before = nvml.energy_j()
    fake.gpus[0]["energy_mj"] += 36_000  # 36 J
    after = nvml.energy_j()
    assert after[0] - before[0] == pytest.approx(36.0)
    assert after[1] == before[1]


def test_pynvml_lost_gpu_gives_nan_and_one_warning(install, capsys):
    fake = FakeNvml(nvml_gpus(2))
    install("pynvml", fake)
    nvml = NvmlPower()
    fake.gpus[1]["lost"] = True
    readings = [nvml.read() for _ in range(3)]
    assert all(r[0] == pytest.approx(100.0) and math.isnan(r[1]) for r in readings)
    assert math.isnan(nvml.energy_j()[1])
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "pynvml gpu1 did not answer (GPU is lost)" in err


def test_pynvml_missing_library_is_one_line_naming_the_package(no_vendor_libraries):
    with pytest.raises(MethodUnavailable) as caught:
        NvmlPower()
    assert str(caught.value) == ("pynvml: Python module 'pynvml' is not installed "
                                 "(pip install nvidia-ml-py, extra 'nvidia')")


def test_pynvml_without_driver_is_unavailable(install):
    fake = FakeNvml([])

    def no_driver():
        raise FakeNvml.NVMLError("Driver Not Loaded")

    fake.nvmlInit = no_driver
    install("pynvml", fake)
    with pytest.raises(MethodUnavailable, match=r"^pynvml: NVML did not start \(Driver Not Loaded\)$"):
        NvmlPower()


def amd_gpus():
    return [
        {"uuid": UUIDS[0], "power_info": {"average_socket_power": 250, "current_socket_power": "N/A"},
         "energy_count": {"power": 1000, "counter_resolution": 15.3}},
        {"uuid": UUIDS[1], "power_info": {"socket_power": 0, "current_socket_power": 480},
         "energy_count": {"energy_accumulator": 2000, "counter_resolution": 15.3}},
        {"uuid": UUIDS[2], "power_info": {"current_socket_power": 300},
         "energy_count": {"energy_accumulator": 0, "counter_resolution": 15.3}},
    ]


def test_rocm_amdsmi_power_from_whichever_field_the_gpu_fills(install):
    install("amdsmi", FakeAmdSmi(amd_gpus()))
    rocm = RocmPower()
    assert rocm.read() == pytest.approx([250.0, 480.0, 300.0])
    # ticks x resolution (uJ); the key was "power" before ROCm 6.2
    assert rocm.energy_j() == pytest.approx([1000 * 15.3e-6, 2000 * 15.3e-6, 0.0])


def test_rocm_applies_rocr_then_hip_visible_devices(install, monkeypatch):
    install("amdsmi", FakeAmdSmi(amd_gpus()))
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "GPU-cccc,1")
    assert [c.device for c in RocmPower().channels] == ["gpu2", "gpu1"]
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1")  # the second of those
    assert [c.device for c in RocmPower().channels] == ["gpu1"]


def test_rocm_falls_back_to_pyrsmi_without_a_counter(install):
    rocml = FakeRocml([210.0, -1])
    install("pyrsmi.rocml", rocml)
    rocm = RocmPower()
    first = rocm.read()
    assert first[0] == pytest.approx(210.0) and math.isnan(first[1])
    assert rocm.energy_j() is None


def test_rocm_missing_libraries_named(no_vendor_libraries):
    with pytest.raises(MethodUnavailable, match=r"^rocm: neither Python module 'amdsmi' nor 'pyrsmi'"):
        RocmPower()


def test_gc_reads_each_ipu_and_keeps_na_in_its_place(install, capsys):
    fake = FakeGcIpuInfo(["101.5W", "N/A", "99W"])
    install("gcipuinfo", fake)
    gc = IpuPower()
    assert fake.update_mode is True
    first, second = gc.read(), gc.read()
    for reading in (first, second):
        assert reading[0] == pytest.approx(101.5) and reading[2] == pytest.approx(99.0)
        assert math.isnan(reading[1])
    assert capsys.readouterr().err.count("gc ipu1 did not answer") == 1
    assert gc.energy_j() is None


def test_gc_ipu_vanishing_from_the_list_gives_nan(install):
    fake = FakeGcIpuInfo(["50W", "60W"])
    install("gcipuinfo", fake)
    gc = IpuPower()
    fake.powers = ["50W"]
    reading = gc.read()
    assert reading[0] == pytest.approx(50.0) and math.isnan(reading[1])


def test_gc_without_ipus_is_unavailable(install):
    install("gcipuinfo", FakeGcIpuInfo([]))
    with pytest.raises(MethodUnavailable, match=r"^gc: gcipuinfo lists no IPU$"):
        IpuPower()


@pytest.mark.parametrize("text, value", [("98.3W", 98.3), (" 120 W ", 120.0)])
def test_gc_power_text(text, value):
    assert watts(text) == pytest.approx(value)
