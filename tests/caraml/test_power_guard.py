"""The job's power guard and the Slurm epilog's reset (caraml/job/power_guard.py),
as processes of their own against the file-backed fake NVML and amdsmi
(tests/fake_bindings): a guard puts back a limit that a process which set it
could not, however that process ended (SIGKILL, abort, segfault), reads it
again and writes what it did; a guard that cannot says so; the epilog sets
every GPU of the node, at every scope it reports, to its default."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from caraml.job import watch
from caraml.row import power_limit as row_limit

ROOT = Path(__file__).resolve().parents[2]
BINDINGS = ROOT / "tests" / "fake_bindings"


def _gpu(uuid: str, limit_w: float, default_w: float = 250, **extra) -> dict:
    return {"uuid": uuid, "power_mw": 0, "energy_mj": 0, "limit_mw": int(limit_w * 1000),
            "limit_range_mw": [100_000, 300_000], "default_mw": int(default_w * 1000), **extra}


def _env(tmp_path: Path, nvml: dict | None = None, amd: list | None = None, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}
    env["PYTHONPATH"] = os.pathsep.join([str(BINDINGS), str(ROOT)])
    env.pop("CARAML_FAKE_NVML_STATE", None)
    env.pop("CARAML_FAKE_AMDSMI_STATE", None)
    if nvml is not None:
        (tmp_path / "nvml.json").write_text(json.dumps(nvml))
        env["CARAML_FAKE_NVML_STATE"] = str(tmp_path / "nvml.json")
    if amd is not None:
        (tmp_path / "amdsmi.json").write_text(json.dumps(amd))
        env["CARAML_FAKE_AMDSMI_STATE"] = str(tmp_path / "amdsmi.json")
    return {**env, **extra}


def _nvml_mw(tmp_path: Path) -> list[int]:
    return [g["limit_mw"] for g in json.loads((tmp_path / "nvml.json").read_text())["gpus"]]


def _guard(tmp_path: Path, env: dict, *extra: str) -> subprocess.Popen:
    guard = subprocess.Popen([sys.executable, "-m", "caraml.job.power_guard", "guard", "--dir", str(tmp_path),
                              *extra], env=env, cwd=tmp_path)
    ready = subprocess.run([sys.executable, "-m", "caraml.job.power_guard", "wait", "--dir", str(tmp_path),
                            "--nodes", "1", "--timeout-s", "60"], env=env, capture_output=True, text=True)
    assert ready.returncode == 0 and "warning" not in ready.stdout, ready.stdout
    return guard


def _record(tmp_path: Path) -> str:
    return "".join(p.read_text() for p in tmp_path.glob("power_guard.*"))


# A rank: sets gpu1's limit to 150 W (the suite's own path), says so, then ends as told
_RANK = """
import ctypes, os, signal, sys
from jpwr.gpu.power_limit import limited
with limited(150.0, local_index=1):
    print("set", flush=True)
    how = sys.argv[1]
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "abort":
        os.abort()
    if how == "segfault":
        ctypes.string_at(0)
"""


@pytest.mark.parametrize("how, died_of", [("kill", -signal.SIGKILL), ("abort", -signal.SIGABRT),
                                          ("segfault", -signal.SIGSEGV)])
def test_the_guard_puts_back_a_limit_whose_process_died_without_a_word(tmp_path, how, died_of):
    env = _env(tmp_path, {"gpus": [_gpu("GPU-a", 250), _gpu("GPU-b", 200)]})
    guard = _guard(tmp_path, env)
    rank = subprocess.run([sys.executable, "-c", _RANK, how], env=env, capture_output=True, text=True,
                          timeout=120)
    assert rank.returncode == died_of and rank.stdout == "set\n", rank.stderr
    assert _nvml_mw(tmp_path) == [250_000, 150_000]  # left as the process set it
    guard.send_signal(signal.SIGUSR2)  # as the job script does once its launcher has ended
    assert guard.wait(timeout=60) == 0
    assert _nvml_mw(tmp_path) == [250_000, 200_000]  # as the guard found them
    record = _record(tmp_path)
    assert "CARAML power guard: host=" in record
    assert "device=gpu1 scope=gpu found_w=200 default_w=250" in record
    assert "device=gpu1 scope=gpu found_w=200 was_w=150 reads_w=200 restored=yes" in record
    assert "device=gpu0 scope=gpu found_w=250 was_w=250 reads_w=250 restored=yes" in record
    assert row_limit.guard_outcome(record) == "yes"
    assert "when=SIGUSR2" in record


def test_a_guard_that_cannot_put_a_limit_back_says_so_and_fails(tmp_path):
    env = _env(tmp_path, {"gpus": [_gpu("GPU-a", 250)]})
    guard = _guard(tmp_path, env)
    state = json.loads((tmp_path / "nvml.json").read_text())
    state["gpus"][0]["limit_mw"] = 120_000  # left by a killed rank
    state["refuse_next_set"] = True  # and the guard's set refused
    (tmp_path / "nvml.json").write_text(json.dumps(state))
    guard.send_signal(signal.SIGTERM)
    assert guard.wait(timeout=60) == 1
    record = _record(tmp_path)
    assert "found_w=250 was_w=120 reads_w=120 restored=no" in record
    assert row_limit.guard_outcome(record) == "no"


def test_a_guard_ends_when_the_job_script_it_watches_is_gone(tmp_path):
    env = _env(tmp_path, {"gpus": [_gpu("GPU-a", 250)]})
    script = subprocess.Popen(["sleep", "600"])
    guard = _guard(tmp_path, env, "--watch-pid", str(script.pid))
    state = json.loads((tmp_path / "nvml.json").read_text())
    state["gpus"][0]["limit_mw"] = 180_000
    (tmp_path / "nvml.json").write_text(json.dumps(state))
    script.kill()  # killed outright: no trap of the script runs
    script.wait()
    assert guard.wait(timeout=60) == 0
    assert _nvml_mw(tmp_path) == [250_000]
    assert "when=job-script-gone" in _record(tmp_path)


def test_a_node_without_a_readable_gpu_is_ready_at_once_and_guards_nothing(tmp_path):
    guard = _guard(tmp_path, _env(tmp_path))  # no binding here
    assert guard.wait(timeout=60) == 0
    record = _record(tmp_path)
    assert "limits=0" in record and "restored=none" in record
    assert row_limit.guard_outcome(record) is None


def test_waiting_for_guards_that_are_not_there_ends_with_a_warning(tmp_path):
    (tmp_path / "power_guard.n1").write_text("CARAML power guard ready: host=n1 limits=0\n")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "caraml.job.power_guard", "wait", "--dir", str(tmp_path),
                           "--nodes", "2", "--timeout-s", "0.5"], env=_env(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and time.monotonic() - started < 60
    assert "the power guard is ready on 1 of 2 nodes (n1)" in done.stdout


# --- the epilog's reset ------------------------------------------------------------------------


def _reset(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(ROOT / "site" / "slurm-epilog-power-limits.sh")],
                          env={**env, "CARAML_EPILOG_PYTHON": sys.executable},
                          capture_output=True, text=True, timeout=120)


def test_the_epilog_sets_every_gpu_and_gh200_module_to_its_default(tmp_path):
    superchip = _gpu("GPU-gh", 600, default_w=900, limit_range_mw=[100_000, 900_000],
                     module_limit_mw=500_000, module_range_mw=[200_000, 1_000_000],
                     module_default_mw=680_000)
    env = _env(tmp_path, {"gpus": [_gpu("GPU-a", 150), _gpu("GPU-b", 250), superchip]},
               CUDA_VISIBLE_DEVICES="0")  # a job's grant does not narrow the node's reset
    done = _reset(env)
    assert done.returncode == 0, done.stdout + done.stderr
    gpus = json.loads((tmp_path / "nvml.json").read_text())["gpus"]
    assert [g["limit_mw"] for g in gpus] == [250_000, 250_000, 900_000]
    assert gpus[2]["module_limit_mw"] == 680_000
    assert done.stdout.count("reset=yes") == 4  # three GPUs and one module
    assert "device=gpu0 scope=gpu was_w=150 default_w=250 reset=yes" in done.stdout


def test_the_epilog_resets_every_gcd_of_an_amd_host_and_fails_where_one_refuses(tmp_path):
    amd = [{"uuid": f"u{i}", "power_cap_uw": 300_000_000 + i, "cap_range_uw": [100_000_000, 560_000_000],
            "default_cap_uw": 500_000_000} for i in range(4)]
    env = _env(tmp_path, amd=amd)
    done = _reset(env)
    assert done.returncode == 0, done.stdout + done.stderr
    caps = [g["power_cap_uw"] for g in json.loads((tmp_path / "amdsmi.json").read_text())]
    assert caps == [500_000_000] * 4
    amd[2]["refuse"] = True  # a cap the node cannot have back: Slurm drains it on the epilog's failure
    done = _reset(_env(tmp_path, amd=amd))
    assert done.returncode == 1 and "device=gpu2 scope=gpu was_w=300 default_w=500 reset=no" in done.stdout


def test_the_job_watcher_kills_what_a_dead_script_started_but_leaves_the_guard_its_work(tmp_path):
    """Without Slurm the job's watcher (caraml/job/watch.py) kills what a job
    script killed outright had started; the guard, started by the script too,
    lives on to put the limit back and ends by itself."""
    env = _env(tmp_path, {"gpus": [_gpu("GPU-a", 250)]})
    script = subprocess.Popen(["sleep", "600"])  # the job script
    rank = subprocess.Popen(["sleep", "600"])
    guard = _guard(tmp_path, env, "--watch-pid", str(script.pid))
    started = {(p.pid, watch._stat(p.pid)[1]) for p in (rank, guard)}
    state = json.loads((tmp_path / "nvml.json").read_text())
    state["gpus"][0]["limit_mw"] = 160_000  # set by the rank
    (tmp_path / "nvml.json").write_text(json.dumps(state))
    script.kill()
    script.wait()
    assert watch.kill_all(started) == 1
    assert rank.wait(timeout=60) == -signal.SIGKILL
    assert guard.wait(timeout=60) == 0
    assert _nvml_mw(tmp_path) == [250_000] and "when=job-script-gone" in _record(tmp_path)
