"""A power-limit sweep's point (caraml/power_limit.py) and the driver core
that sets it (caraml/node/driver.py), against the fake NVML binding: the points
a sweep takes, the limit set before the set-up and put back however the run
ends (a TERM in the timed window, an exception in a step), the refusal
without privilege and out of range before training, and the row's record."""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from caraml import power_limit
from caraml.node import driver
from caraml.node.options import DriverOptions
from caraml.report import BenchmarkInputError, kv_lines
from caraml.row import power_limit as row_limit
from tests.dist_fixtures import LAUNCHER_VARIABLES
from tests.driver_runs import Child, count_lines, worker_with_rank
from tests.jpwr.jpwr_fakes import FakeNvml, FakeScopedNvml, wait_for


@dataclass(frozen=True, kw_only=True)
class Opts(DriverOptions):
    pass


@pytest.mark.parametrize("point, tdp, watts", [
    ("default", 400.0, None), ("300", None, 300.0), ("0.75", 400.0, 300.0), ("1", 400.0, 400.0),
])
def test_a_point_is_the_default_watts_or_a_fraction_of_the_tdp(point, tdp, watts):
    assert power_limit.asked_w(point, tdp) == watts


@pytest.mark.parametrize("point, tdp, says", [
    ("0.75", None, "declares no TDP"), ("300W", 400.0, "none of 'default'"),
    ("-5", 400.0, "none of 'default'"), ("$(reboot)", 400.0, "none of 'default'"),
])
def test_a_point_that_is_none_of_these_is_refused_with_what_one_is(point, tdp, says):
    with pytest.raises(BenchmarkInputError, match=says):
        power_limit.asked_w(point, tdp)


def test_a_range_may_leave_either_end_open():
    assert power_limit.parse_range("100:400") == (100.0, 400.0)
    assert power_limit.parse_range(":680") == (None, 680.0)
    assert power_limit.parse_range("") is None
    with pytest.raises(BenchmarkInputError, match="LOW:HIGH"):
        power_limit.parse_range("400")


@pytest.mark.parametrize("what, env, systems, users, bad, says", [
    ("sweep", power_limit.POINTS_ENV, "default;0.6;0.8", "default;250", "default;250 W",
     "CARAML_POWER_LIMITS: power limit '250 W' is none of"),
    ("scope", power_limit.SCOPE_ENV, "module", "gpu", "node",
     "CARAML_POWER_LIMIT_SCOPE: power limit scope 'node' is none of gpu or module or package"),
])
def test_the_user_replaces_the_systems_points_and_scope_and_each_is_checked(
        monkeypatch, capsys, what, env, systems, users, bad, says):
    monkeypatch.delenv(env, raising=False)
    assert power_limit.main([what, systems]) == 0
    assert capsys.readouterr().out == systems
    monkeypatch.setenv(env, users)
    assert power_limit.main([what, systems]) == 0
    assert capsys.readouterr().out == users
    monkeypatch.setenv(env, bad)
    assert power_limit.main([what, systems]) == 2
    assert says in capsys.readouterr().err


# --- the driver core sets and restores the limit --------------------------------------------


@pytest.fixture
def nvml(monkeypatch):
    fake = FakeNvml([{"uuid": "GPU-aaaa", "power_mw": 0, "energy_mj": 0, "limit_mw": 400_000,
                      "limit_range_mw": (100_000, 400_000)}])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    for var in (*LAUNCHER_VARIABLES, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    return fake


def _run(nvml, step, limit="250", **opts):
    """driver.main with a training function that runs `step` in the driver
    core's loop; returns the exit status and what the device's limit was
    at each step."""
    seen = []
    options = Opts(train_iters=6, warmup_iters=2, energy_methods=("none",), device="cpu",
                   power_limit=limit, **opts)

    def train(args, dist, stop, meter):
        def counted():
            seen.append(nvml.gpus[0]["limit_mw"])
            return step(len(seen))
        result = driver.train_loop(counted, args, dist, stop, meter, lambda *a: "progress")
        return driver.report_result(dist, result, rank_line=lambda d: {},
                                    global_line=lambda job: {})
    return driver.main([], lambda argv: options, train), seen


def _lines(text: str, scope: str) -> list[dict]:
    return kv_lines(text, f"CARAML {scope}:")


def test_the_limit_holds_for_the_whole_run_and_is_put_back_after_it(nvml, capsys):
    status, seen = _run(nvml, lambda i: 0.0)
    assert status == driver.EXIT_OK
    assert seen == [250_000] * 6
    assert nvml.limit_calls == [(0, 250_000), (0, 400_000)]
    out = capsys.readouterr().out
    assert _lines(out, power_limit.SET_SCOPE) == [
        {"rank": "0", "device": "gpu0", "scope": "gpu", "mode": "suite", "asked": "250", "asked_w": "250",
         "before_w": "400", "reported_w": "250"}]
    assert _lines(out, power_limit.RESTORED_SCOPE) == [
        {"rank": "0", "device": "gpu0", "restored": "yes", "limit_w": "400"}]


def test_a_term_in_the_timed_window_stops_the_run_and_restores_the_limit(nvml, capsys):
    def step(i):
        if i == 4:  # the second timed iteration
            os.kill(os.getpid(), signal.SIGTERM)
        return 0.0
    status, seen = _run(nvml, step)
    assert status == driver.EXIT_OK and len(seen) == 4
    out = capsys.readouterr().out
    assert "CARAML stop: signal SIGTERM" in out
    assert nvml.limit_calls == [(0, 250_000), (0, 400_000)]
    assert row_limit.fields("250", None, out)["power_limit_restored"] is True


def test_an_exception_in_a_step_restores_the_limit(nvml, capsys):
    def step(i):
        if i == 3:
            raise RuntimeError("a step that fails")
        return 0.0
    with pytest.raises(RuntimeError, match="a step that fails"):
        _run(nvml, step)
    assert nvml.gpus[0]["limit_mw"] == 400_000
    assert nvml.limit_calls == [(0, 250_000), (0, 400_000)]
    assert "restored=yes" in capsys.readouterr().out


def test_without_privilege_the_run_fails_before_training_with_one_line(nvml, capsys):
    nvml.gpus[0]["refuse"] = True
    status, seen = _run(nvml, lambda i: 0.0)
    assert status == driver.EXIT_INPUT and seen == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("CARAML ERROR: setting the power limit of gpu0")
    assert "needs root" in err[0]
    assert nvml.gpus[0]["limit_mw"] == 400_000


def test_a_limit_out_of_the_systems_range_fails_before_training(nvml, capsys):
    status, seen = _run(nvml, lambda i: 0.0, limit="0.9", tdp_w=400.0,
                        power_limit_range_w="150:300")
    assert status == driver.EXIT_INPUT and seen == []
    assert "power limit 360 W is outside 150-300 W" in capsys.readouterr().err
    assert nvml.limit_calls == []


def test_the_default_point_sets_nothing_and_reports_the_limit(nvml, capsys):
    status, seen = _run(nvml, lambda i: 0.0, limit="default")
    assert status == driver.EXIT_OK and seen == [400_000] * 6 and nvml.limit_calls == []
    part = row_limit.fields("default", None, capsys.readouterr().out)
    assert part == {"power_limit": "default", "power_limit_asked_w": None, "power_limit_scope": None,
                    "power_limit_mode": "suite", "power_limit_before_w": 400.0, "power_limit_w": 400.0,
                    "power_limit_restored": True, "power_limit_restored_by": "ranks",
                    "power_limit_differs_on_ranks": (), "power_limit_put_back_early": (),
                    "power_limit_at_start_w": 400.0, "power_limit_default_w": 400.0,
                    "power_limit_not_default_at_start": ()}


_SUPERCHIP = {"uuid": "GPU-gh", "power_mw": 0, "energy_mj": 0, "limit_mw": 900_000,
              "limit_range_mw": (100_000, 900_000), "module_limit_mw": 680_000,
              "module_range_mw": (200_000, 1_000_000)}


def test_a_gh200_point_sets_the_module_limit_and_its_row_says_so(nvml, monkeypatch, capsys):
    scoped = FakeScopedNvml([dict(_SUPERCHIP)])
    monkeypatch.setitem(sys.modules, "pynvml", scoped)
    status, _ = _run(scoped, lambda i: 0.0, limit="0.8", tdp_w=680.0, power_limit_range_w=":680",
                     power_limit_scope="module")
    assert status == driver.EXIT_OK
    assert scoped.limit_calls == [(0, 544_000, "module"), (0, 680_000, "module")]
    out = capsys.readouterr().out
    assert _lines(out, power_limit.SET_SCOPE)[0]["scope"] == "module"
    part = row_limit.fields("0.8", 680.0, out, "module")
    assert (part["power_limit_scope"], part["power_limit_asked_w"], part["power_limit_before_w"],
            part["power_limit_w"], part["power_limit_restored"]) == ("module", 544.0, 680.0, 544.0, True)


def test_a_module_point_with_a_binding_without_scopes_fails_before_training(nvml, capsys):
    nvml.gpus[0].update(_SUPERCHIP)
    status, seen = _run(nvml, lambda i: 0.0, limit="600", power_limit_scope="module")
    assert status == driver.EXIT_INPUT and seen == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nvmlDeviceSetPowerManagementLimit_v2" in err[0]
    assert "in watts of the GPU limit at gpu scope" in err[0]
    assert nvml.limit_calls == [] and nvml.gpus[0]["limit_mw"] == 900_000


def test_every_run_records_the_limit_at_its_start_and_the_default_before_setting(nvml, capsys):
    nvml.gpus[0].update(limit_mw=180_000, default_mw=400_000)  # a cap left by an earlier job
    status, seen = _run(nvml, lambda i: 0.0, limit=None)  # a plain run: nothing set
    assert status == driver.EXIT_OK and seen == [180_000] * 6 and nvml.limit_calls == []
    out = capsys.readouterr().out
    assert _lines(out, power_limit.START_SCOPE) == [
        {"rank": "0", "device": "gpu0", "scope": "gpu", "limit_w": "180", "default_w": "400"}]
    status, _ = _run(nvml, lambda i: 0.0, limit="250")
    out = capsys.readouterr().out
    assert _lines(out, power_limit.START_SCOPE)[0]["limit_w"] == "180"  # read before the point set 250 W
    assert out.index("CARAML power limit at start:") < out.index("CARAML power limit: ")


def test_a_run_without_a_gpu_library_records_nothing_and_runs(nvml, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    status, _ = _run(nvml, lambda i: 0.0, limit=None)
    assert status == driver.EXIT_OK and "power limit" not in capsys.readouterr().out


def test_in_external_mode_the_centres_limit_is_checked_and_recorded_not_set(nvml, capsys):
    nvml.gpus[0]["limit_mw"] = 250_000  # set by the centre's prolog for this job
    status, seen = _run(nvml, lambda i: 0.0, limit="250", power_limit_mode="external")
    assert status == driver.EXIT_OK and seen == [250_000] * 6 and nvml.limit_calls == []
    out = capsys.readouterr().out
    assert _lines(out, power_limit.SET_SCOPE)[0]["mode"] == "external"
    assert row_limit.fields("250", None, out)["power_limit_restored"] is True
    status, seen = _run(nvml, lambda i: 0.0, limit="200", power_limit_mode="external")
    assert status == driver.EXIT_INPUT and seen == []
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the power limit of gpu0 is 250 W and this point asks for 200 W" in err[0]
    assert "power_limit_mode external the centre sets it" in err[0]


def test_a_refused_privilege_says_what_the_centre_must_provide_and_is_noted_for_the_sweep(
        nvml, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CARAML_RUNDIR", str(tmp_path))
    nvml.gpus[0]["refuse"] = True
    status, _ = _run(nvml, lambda i: 0.0, limit="0.5", tdp_w=400.0)
    assert status == driver.EXIT_INPUT
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "the centre must provide jobs that may set GPU power limits" in line
    assert "CARAML_POWER_LIMIT_MODE=external" in line and "sudo" not in line
    said = line.removeprefix("CARAML ERROR: ")
    assert power_limit.refused_before(tmp_path) == f"point 0.5 was refused: {said}"


# --- under torchrun, in processes of their own ------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
# A driver whose step is long and spent with the stop signals blocked in the main thread: no
# Python handler runs there until the step ends, as in a long GPU kernel
_LONG_STEP_DRIVER = """
import signal, sys, time
from dataclasses import dataclass
from caraml.node import driver
from caraml.node.options import DriverOptions
from caraml.node.stopping import STOP_SIGNALS

@dataclass(frozen=True, kw_only=True)
class Opts(DriverOptions):
    pass

def train(args, dist, stop, meter):
    def step():
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        print("CARAML test: step", flush=True)
        time.sleep(float(sys.argv[2]))
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        return 0.0
    result = driver.train_loop(step, args, dist, stop, meter, lambda *a: "progress")
    return driver.report_result(dist, result, rank_line=lambda d: {}, global_line=lambda job: {})

options = Opts(train_iters=4, warmup_iters=1, energy_methods=("none",), device="cpu",
               power_limit=sys.argv[1], tdp_w=300.0)
sys.exit(driver.main([], lambda argv: options, train))
"""


def _torchrun(tmp_path: Path, monkeypatch, gpus: list[dict], procs: int, *args: str) -> Child:
    (tmp_path / "nvml.json").write_text(json.dumps({"gpus": gpus}))
    (tmp_path / "driver.py").write_text(_LONG_STEP_DRIVER)
    for name in (*LAUNCHER_VARIABLES, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CARAML_FAKE_NVML_STATE", str(tmp_path / "nvml.json"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "tests" / "fake_bindings"), str(ROOT)]))
    return Child([sys.executable, "-m", "torch.distributed.run", "--standalone",
                  f"--nproc-per-node={procs}", str(tmp_path / "driver.py"), *args], cwd=tmp_path)


def _no_rank_traceback(err: str) -> bool:
    """No frame of the suite's own code: the ranks ended with their line (torchrun's own
    traceback of its failed children is the launcher's)."""
    return not any(f'File "{ROOT / package}' in err for package in ("caraml", "jpwr"))


def _gpu_state(tmp_path: Path) -> list[int]:
    return [g["limit_mw"] for g in json.loads((tmp_path / "nvml.json").read_text())["gpus"]]


def _fake_gpu(uuid: str, **extra) -> dict:
    return {"uuid": uuid, "power_mw": 0, "energy_mj": 0, "limit_mw": 700_000, "default_mw": 700_000,
            "limit_range_mw": [100_000, 700_000], **extra}


def test_a_term_under_torchrun_puts_the_limit_back_while_the_step_still_runs(tmp_path, monkeypatch):
    with _torchrun(tmp_path, monkeypatch, [_fake_gpu("GPU-a")], 1, "150", "90") as run:
        run.wait_for(count_lines("CARAML test: step", 2), "the first timed step", timeout=300)
        assert _gpu_state(tmp_path) == [150_000]
        worker = worker_with_rank(run.proc.pid, 0)  # in a session of its own: ended by hand below
        # scancel's TERM: torchrun passes it on to its worker, whose 90 s step outlasts the 30 s
        # torchrun waits before it kills. Without the restore at once that SIGKILL leaves the
        # limit at 150 W for good; the deadline only guards a hang.
        run.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: _gpu_state(tmp_path) == [700_000], "the limit put back", timeout_s=20)
        run.wait_for(lambda lines: any("when=SIGTERM" in line for line in lines), "the restored line")
        os.kill(worker, signal.SIGKILL)
    assert "CARAML power limit restored: rank=0 device=gpu0 restored=yes limit_w=700 when=SIGTERM" in \
        "".join(run._out)


def test_a_rank_that_cannot_set_its_limit_fails_every_rank_in_one_line_and_none_keeps_one(
        tmp_path, monkeypatch):
    # gpu1 allows no more than 140 W: rank 1 is refused after rank 0 has set its 150 W
    with _torchrun(tmp_path, monkeypatch, [_fake_gpu("GPU-a"),
                                           _fake_gpu("GPU-b", limit_range_mw=[100_000, 140_000])],
                   2, "150", "1") as run:
        status, out, err = run.finish()
    assert status != 0
    errors = [line for line in err.splitlines() if "CARAML ERROR" in line]
    assert len(errors) == 1 and "power limit 150 W is outside 100-140 W" in errors[0], err
    assert _no_rank_traceback(err)
    assert _gpu_state(tmp_path) == [700_000, 700_000]
    assert json.loads((tmp_path / "nvml.json").read_text())["set_mw"] == [150_000, 700_000]


def test_a_limit_that_cannot_be_read_fails_every_rank_in_one_line(tmp_path, monkeypatch):
    with _torchrun(tmp_path, monkeypatch, [_fake_gpu("GPU-a"), _fake_gpu("GPU-mig", unsupported=True)],
                   2, "150", "1") as run:
        status, out, err = run.finish()
    errors = [line for line in err.splitlines() if "CARAML ERROR" in line]
    assert status != 0 and _no_rank_traceback(err)
    assert len(errors) == 1 and "NVML cannot read the power limit of gpu1 (Not Supported)" in errors[0]
    assert _gpu_state(tmp_path) == [700_000, 700_000] and "set_mw" not in (tmp_path / "nvml.json").read_text()


# --- the row's record ---------------------------------------------------------------------


_TWO_RANKS = """\
CARAML power limit: rank=0 device=gpu0 asked=0.75 asked_w=300 before_w=400 reported_w=300
CARAML power limit: rank=1 device=gpu1 asked=0.75 asked_w=300 before_w=400 reported_w=295
CARAML power limit restored: rank=0 device=gpu0 restored=yes limit_w=400
"""


def test_the_row_says_a_limit_a_rank_did_not_put_back_and_devices_that_differ():
    part = row_limit.fields("0.75", 400.0, _TWO_RANKS)
    assert {name: part[name] for name in ("power_limit", "power_limit_asked_w", "power_limit_scope",
                                          "power_limit_mode", "power_limit_before_w", "power_limit_w",
                                          "power_limit_restored", "power_limit_restored_by")} == {
        "power_limit": "0.75", "power_limit_asked_w": 300.0, "power_limit_scope": None,
        "power_limit_mode": "suite", "power_limit_before_w": 400.0, "power_limit_w": 300.0,
        "power_limit_restored": False, "power_limit_restored_by": None}
    assert row_limit.flags(part, measured=True) == [
        "power-limit-not-restored", "power-limit-differs-on-ranks(1)"]


def test_a_job_that_asked_for_no_point_has_no_limit_and_one_that_set_none_is_flagged():
    assert set(row_limit.fields("", 400.0, _TWO_RANKS).values()) <= {None, ()}
    part = row_limit.fields("300", None, "")
    assert part["power_limit_asked_w"] == 300.0 and part["power_limit_w"] is None
    assert row_limit.flags(part, measured=True) == ["power-limit-not-set"]
