"""Setting a GPU's power limit for a block and putting it back
(jpwr/gpu/power_limit.py), against fake NVML and amdsmi bindings: the order
of the calls, the restore on every end, the refusal without privilege and
the refusal of a limit out of range."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from jpwr_fakes import FakeAmdSmi, FakeNvml, FakeScopedNvml

from jpwr.gpu.power_limit import PowerLimitError, limited
from jpwr.gpu.rocm import RocmPower

ROOT = Path(__file__).resolve().parents[2]


def _gpu(uuid: str, limit_w: float = 400, low_w: float = 100, high_w: float = 400, **extra) -> dict:
    return {"uuid": uuid, "power_mw": 0, "energy_mj": 0, "limit_mw": int(limit_w * 1000),
            "limit_range_mw": (int(low_w * 1000), int(high_w * 1000)), **extra}


@pytest.fixture
def nvml(install):
    fake = FakeNvml([_gpu("GPU-aaaa"), _gpu("GPU-bbbb")])
    install("pynvml", fake)
    return fake


def test_the_limit_is_set_read_back_and_the_previous_one_restored_after_the_block(nvml):
    with limited(250.0) as limit:
        assert nvml.gpus[0]["limit_mw"] == 250_000
        assert (limit.device, limit.asked_w, limit.before_w, limit.reported_w) == \
            ("gpu0", 250.0, 400.0, 250.0)
    assert nvml.limit_calls == [(0, 250_000), (0, 400_000)]  # set, then restore
    assert limit.restored and nvml.gpus[0]["limit_mw"] == 400_000
    assert nvml.initialised == 0  # NVML shut down again


def test_the_default_limit_is_read_beside_the_limit(nvml):
    nvml.gpus[0].update(limit_mw=180_000, default_mw=400_000)  # a cap left by an earlier job
    with limited(None) as limit:
        assert (limit.before_w, limit.default_w) == (180.0, 400.0)


def test_the_limit_goes_back_at_once_from_another_thread_and_once_only(nvml):
    with limited(200.0) as limit:
        thread = threading.Thread(target=limit.restore_now)  # as at the first stop signal
        thread.start()
        thread.join()
        assert nvml.gpus[0]["limit_mw"] == 400_000  # while the block still runs
    assert limit.restored and nvml.limit_calls == [(0, 200_000), (0, 400_000)]


def test_a_limit_that_does_not_read_back_is_not_restored_and_says_so(nvml, capsys):
    with limited(200.0) as limit:
        nvml.gpus[0]["refuse"] = True  # the device no longer takes a limit
    assert limit.restored is False and nvml.gpus[0]["limit_mw"] == 200_000
    assert "could not be put back to 400 W" in capsys.readouterr().err


@pytest.mark.parametrize("library, fake, gpu", [
    ("nvml", FakeNvml, {"uuid": "GPU-vgpu", "power_mw": 0, "energy_mj": 0, "unsupported": True}),
    ("amdsmi", FakeAmdSmi, {"uuid": "u1", "unsupported": True}),  # an MI250's second GCD
])
def test_a_device_without_a_limit_of_its_own_is_one_line(install, library, fake, gpu):
    install("pynvml" if library == "nvml" else "amdsmi", fake([gpu]))
    with pytest.raises(PowerLimitError) as refused:
        with limited(250.0, library=library):
            raise AssertionError("the block must not run")
    message = str(refused.value)
    assert "\n" not in message and "cannot read the power limit of gpu0" in message
    assert "(a vGPU or a MIG instance or the second GCD of an MI250)" in message


def _amd_host(count: int = 4) -> list[dict]:
    return [{"uuid": f"u{i}", "power_cap_uw": 500_000_000, "cap_range_uw": (100_000_000, 500_000_000),
             "power_info": {"socket_power": 100 + i}, "energy_count": {"energy_accumulator": 1000,
                                                                       "counter_resolution": 15.3}}
            for i in range(count)]


@pytest.mark.parametrize("variables", [
    {"CUDA_VISIBLE_DEVICES": "2,3"},  # HIP honours CUDA's variable where its own is unset
    {"ROCR_VISIBLE_DEVICES": "1,2,3", "HIP_VISIBLE_DEVICES": "1,2"},  # HIP's counts within ROCR's
    {"ROCR_VISIBLE_DEVICES": "u2,u3", "CUDA_VISIBLE_DEVICES": "0,1"},
])
def test_amd_limits_and_energy_cover_the_gpus_hip_sees_and_no_others(install, monkeypatch, variables):
    fake = FakeAmdSmi(_amd_host())
    install("amdsmi", fake)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with limited(300.0, local_index=0) as first, limited(350.0, local_index=1) as second:
        assert (first.device, second.device) == ("gpu2", "gpu3")
        assert [g["power_cap_uw"] for g in fake.gpus] == [500_000_000] * 2 + [300_000_000, 350_000_000]
    assert [g["power_cap_uw"] for g in fake.gpus] == [500_000_000] * 4
    method = RocmPower()
    assert [c.device for c in method.channels] == ["gpu2", "gpu3"]
    assert method.read() == [102.0, 103.0]


def test_an_mi250_card_is_limited_once_through_its_first_gcd(install, monkeypatch):
    fake = FakeAmdSmi(_amd_host())
    for gcd in fake.gpus[1::2]:
        gcd["unsupported"] = True  # the second GCD of each card has no cap of its own
    install("amdsmi", fake)
    with limited(400.0, local_index=0, scope="package", devices_per_package=2) as card, \
            limited(400.0, local_index=1, scope="package", devices_per_package=2) as second:
        assert (card.device, card.owner, card.reported_w) == ("gpu0+gpu1", True, 400.0)
        # the card's other GCD sets nothing and reports the card's limit
        assert (second.device, second.owner, second.asked_w, second.before_w) == ("gpu0+gpu1", False, 400.0,
                                                                                 400.0)
        assert fake.gpus[0]["power_cap_uw"] == 400_000_000
    assert fake.gpus[0]["power_cap_uw"] == 500_000_000
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "1,2")  # a job given the first card's second GCD
    with limited(450.0, local_index=0, scope="package", devices_per_package=2) as card:
        assert (card.device, card.owner) == ("gpu0+gpu1", True)
        assert fake.gpus[0]["power_cap_uw"] == 450_000_000


def test_nvml_refuses_the_package_scope(install):
    install("pynvml", FakeNvml([_gpu("GPU-aaaa")]))
    with pytest.raises(PowerLimitError, match="NVML sets no package power limit"):
        with limited(300.0, scope="package"):
            pass


def test_an_exception_in_the_block_restores_the_limit_and_goes_on(nvml):
    with pytest.raises(ZeroDivisionError):
        with limited(200.0):
            1 / 0  # noqa: B018 - a failing training step
    assert nvml.limit_calls == [(0, 200_000), (0, 400_000)]


def test_each_local_rank_sets_its_own_visible_gpu(nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")
    with limited(300.0, local_index=0) as limit:
        assert limit.device == "gpu1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with limited(300.0, local_index=1):
        pass
    assert nvml.limit_calls == [(1, 300_000), (1, 400_000)] * 2
    assert nvml.gpus[0]["limit_mw"] == 400_000


def test_the_default_point_sets_nothing_and_reports_the_limit_there_is(nvml):
    with limited(None) as limit:
        assert (limit.asked_w, limit.before_w, limit.reported_w) == (None, 400.0, 400.0)
    assert nvml.limit_calls == [] and limit.restored


def test_without_privilege_the_refusal_is_one_line_naming_the_privilege(install):
    fake = FakeNvml([_gpu("GPU-aaaa", refuse=True)])
    install("pynvml", fake)
    with pytest.raises(PowerLimitError) as refused:
        with limited(250.0):
            raise AssertionError("the block must not run")
    message = str(refused.value)
    assert "\n" not in message and "gpu0" in message and "NVML" in message
    assert "needs root" in message and "privilege" in message
    assert fake.gpus[0]["limit_mw"] == 400_000 and fake.limit_calls == []



def test_a_module_limit_the_device_rounds_is_taken_and_put_back(install):
    fake = FakeScopedNvml([_superchip(step_mw=1000)])  # a sweep's 0.75 x 687 W on a device of whole watts
    install("pynvml", fake)
    with limited(515.25, scope="module") as limit:
        assert limit.reported_w == 515.0
    assert fake.gpus[0]["module_limit_mw"] == 680_000 and limit.restored


def test_a_module_limit_that_goes_half_way_is_put_back(install):
    """The set call went through and left another limit than asked: the
    refusal names it, and the limit found before is put back."""
    fake = FakeScopedNvml([_superchip(takes_mw=600_000)])
    install("pynvml", fake)
    message = _refusal(500.0)
    assert "reads 600 W after setting it" in message
    assert fake.limit_calls == [(0, 500_000, "module"), (0, 680_000, "module")]
    assert fake.gpus[0]["module_limit_mw"] == 680_000

@pytest.mark.parametrize("asked, system_range, shown", [
    (450.0, None, "outside 100-400 W"),  # above the device's range
    (350.0, (150.0, 300.0), "outside 150-300 W"),  # inside the device's, above the system's
    (120.0, (150.0, None), "outside 150-400 W"),  # an open upper end: the device's
])
def test_a_limit_out_of_range_is_refused_with_the_range_before_anything_is_set(
        nvml, asked, system_range, shown):
    with pytest.raises(PowerLimitError, match=shown):
        with limited(asked, system_range=system_range):
            raise AssertionError("the block must not run")
    assert nvml.limit_calls == []


def test_amdsmi_caps_in_microwatts_and_restores(install):
    fake = FakeAmdSmi([{"uuid": "u0", "power_cap_uw": 560_000_000,
                        "cap_range_uw": (100_000_000, 560_000_000)}])
    install("amdsmi", fake)
    with limited(400.0) as limit:
        assert fake.gpus[0]["power_cap_uw"] == 400_000_000
        assert (limit.before_w, limit.reported_w) == (560.0, 400.0)
    assert fake.gpus[0]["power_cap_uw"] == 560_000_000


def test_amdsmi_without_privilege_names_it(install):
    install("amdsmi", FakeAmdSmi([{"uuid": "u0", "power_cap_uw": 560_000_000,
                                   "cap_range_uw": (100_000_000, 560_000_000), "refuse": True}]))
    with pytest.raises(PowerLimitError, match="amdsmi needs root"):
        with limited(400.0):
            pass


def _superchip(**extra) -> dict:
    """A GH200: its GPU limit 900 W (100-900 W), its module's 680 W (200-1000 W)."""
    return _gpu("GPU-gh", limit_w=900, high_w=900, module_limit_mw=680_000,
                module_range_mw=(200_000, 1_000_000), **extra)


def test_the_module_limit_is_set_read_back_and_restored_at_module_scope(install):
    fake = FakeScopedNvml([_superchip()])
    install("pynvml", fake)
    with limited(500.0, scope="module", system_range=(None, 680.0)) as limit:
        assert fake.gpus[0]["module_limit_mw"] == 500_000
        assert (limit.scope, limit.before_w, limit.reported_w) == ("module", 680.0, 500.0)
    assert fake.limit_calls == [(0, 500_000, "module"), (0, 680_000, "module")]
    assert limit.restored and fake.gpus[0]["limit_mw"] == 900_000  # the GPU's own limit untouched


def test_the_default_point_at_module_scope_reports_the_module_limit_and_default(install):
    install("pynvml", FakeScopedNvml([_superchip(module_default_mw=900_000)]))
    with limited(None, scope="module") as limit:
        assert (limit.scope, limit.before_w, limit.reported_w, limit.default_w) == \
            ("module", 680.0, 680.0, 900.0)


def _refusal(asked_w: float, **kwargs) -> str:
    with pytest.raises(PowerLimitError) as refused:
        with limited(asked_w, scope="module", **kwargs):
            raise AssertionError("the block must not run")
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_a_binding_without_power_scopes_refuses_the_module_scope_in_one_line(install):
    fake = FakeNvml([_superchip()])  # an older nvidia-ml-py: no _v2 call, no field values
    install("pynvml", fake)
    message = _refusal(500.0)
    assert "nvmlDeviceSetPowerManagementLimit_v2" in message and "at gpu scope" in message
    assert fake.limit_calls == [] and fake.gpus[0]["limit_mw"] == 900_000  # no fall-back to the GPU's


def test_a_device_without_a_module_limit_refuses_the_module_scope_before_setting(install):
    fake = FakeScopedNvml([_gpu("GPU-h100")])
    install("pynvml", fake)
    message = _refusal(300.0)
    assert "gpu0 reports no module power limit" in message and "at gpu scope" in message
    assert fake.limit_calls == []


def test_a_module_limit_the_device_does_not_take_fails_naming_the_scope(install):
    fake = FakeScopedNvml([_superchip(refuse=True)])  # the binding drops NVML's error
    install("pynvml", fake)
    message = _refusal(500.0)
    assert "refused the module power limit 500 W on gpu0" in message
    assert "reads 680 W after setting it" in message and "at gpu scope" in message
    assert fake.gpus[0]["module_limit_mw"] == 680_000


@pytest.mark.parametrize("asked, system_range, shown", [
    (1100.0, None, "outside 200-1000 W, the range the module of gpu0 allows"),
    (700.0, (None, 680.0), "outside 200-680 W"),  # the module's range, capped by JSC's 680 W
])
def test_a_module_limit_out_of_range_names_the_module_range(install, asked, system_range, shown):
    fake = FakeScopedNvml([_superchip()])
    install("pynvml", fake)
    assert shown in _refusal(asked, system_range=system_range)
    assert fake.limit_calls == []


def test_amdsmi_refuses_the_module_scope(install):
    install("amdsmi", FakeAmdSmi([{"uuid": "u0", "power_cap_uw": 1, "cap_range_uw": (0, 2)}]))
    assert "amdsmi sets no module power limit" in _refusal(400.0, library="amdsmi")


def test_no_library_is_one_line_naming_both(no_vendor_libraries):
    with pytest.raises(PowerLimitError, match="no GPU whose power limit can be set here.*NVML.*amdsmi"):
        with limited(250.0):
            pass


# A process that sets the limit and is then ended by a signal it does not
# handle itself, or that leaves the interpreter from within the block.
_CHILD = """
import json, os, sys, time
from jpwr.gpu.power_limit import limited
with limited(200.0):
    print("set", flush=True)
    if sys.argv[1] == "exit":
        sys.exit(3)
    if sys.argv[1] == "fork":
        worker = os.fork()
        if worker == 0:
            print(os.getpid(), flush=True)  # the worker's own line: it runs
            time.sleep(60)
            os._exit(0)
        os.waitpid(worker, 0)
        state = json.loads(open(os.environ["CARAML_FAKE_NVML_STATE"]).read())
        print(state["gpus"][0]["limit_mw"], flush=True)
    else:
        time.sleep(60)
"""


def _state(tmp_path: Path) -> Path:
    path = tmp_path / "nvml.json"
    path.write_text(json.dumps({"gpus": [_gpu("GPU-aaaa", limit_w=300)]}))
    return path


def _child(tmp_path: Path, how: str) -> subprocess.Popen:
    env = {**os.environ, "CARAML_FAKE_NVML_STATE": str(_state(tmp_path)),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "fake_bindings"), str(ROOT)])}
    return subprocess.Popen([sys.executable, "-c", _CHILD, how], env=env, stdout=subprocess.PIPE,
                            text=True)


def _limit_mw(tmp_path: Path) -> int:
    return json.loads((tmp_path / "nvml.json").read_text())["gpus"][0]["limit_mw"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1])
def test_a_signal_the_process_does_not_handle_restores_the_limit_and_still_ends_it(tmp_path, sig):
    child = _child(tmp_path, "wait")
    assert child.stdout.readline() == "set\n"
    assert _limit_mw(tmp_path) == 200_000
    child.send_signal(sig)
    assert child.wait(timeout=60) == -sig  # ended by the signal, as without the limit
    assert _limit_mw(tmp_path) == 300_000


def test_leaving_the_interpreter_inside_the_block_restores_the_limit(tmp_path):
    child = _child(tmp_path, "exit")
    assert child.wait(timeout=60) == 3
    assert _limit_mw(tmp_path) == 300_000


def test_a_forked_process_that_gets_a_signal_leaves_the_limit_to_its_parent(tmp_path):
    child = _child(tmp_path, "fork")
    assert child.stdout.readline() == "set\n"
    os.kill(int(child.stdout.readline()), signal.SIGTERM)  # e.g. a data loader worker
    assert child.stdout.readline() == "200000\n"  # the parent's limit still holds
    assert child.wait(timeout=60) == 0
    assert _limit_mw(tmp_path) == 300_000
