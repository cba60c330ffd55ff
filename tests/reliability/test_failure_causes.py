"""The cause a failed job's row names (caraml/job/failure.py), from real failure
logs made here on CPU with torchrun and gloo, and from GPU-style logs in
logs/ (see logs/README.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from caraml.job import failure, oom_evidence
from caraml.job.oom_evidence import Verdict

LOGS = Path(__file__).parent / "logs"

# one script, one failure per mode; rank 1 fails, rank 0 is collateral
FAILING = '''
import os, signal, sys
import torch, torch.distributed as dist
mode, rank = sys.argv[1], int(os.environ["RANK"])
if mode == "module" and rank == 1:
    import caraml_no_such_module
if mode == "assert" and rank == 1:
    expected_world = 3
    assert expected_world == int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo")
dist.barrier()
if mode == "alloc" and rank == 1:
    torch.empty(2**50, dtype=torch.uint8)  # a batch far beyond the host's memory
if rank == 1:
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(3)
for _ in range(3):
    dist.all_reduce(torch.ones(1))
'''
MODES = ("assert", "module", "kill", "gloo", "alloc")


@pytest.fixture(scope="module")
def cpu_logs(tmp_path_factory) -> dict[str, Path]:
    """mode -> the stderr of a real two-rank torchrun job that failed that way."""
    base = tmp_path_factory.mktemp("failures")
    script = base / "failing.py"
    script.write_text(FAILING)
    logs = {}
    for mode in MODES:
        log = base / f"{mode}.err"
        with log.open("w") as err:
            proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                   "--nproc-per-node=2", str(script), mode],
                                  stdout=subprocess.DEVNULL, stderr=err, timeout=300)
        assert proc.returncode != 0, log.read_text()
        logs[mode] = log
    venv = base / "venv.err"
    with venv.open("w") as err:
        subprocess.run(["bash", "-c", f"'{base}/checkout/.venv/bin/python' -m llm_training.pretrain_gpt"],
                       stderr=err, check=False)
    logs["venv"] = venv
    return logs


def _line(status: int, log: Path, samples: str = "") -> str:
    line = failure.summary(status, [log], samples)
    assert "\n" not in line and "," not in line
    return line


def test_an_assertion_without_a_message_names_its_file_line_and_rank(cpu_logs):
    line = _line(1, cpu_logs["assert"])
    assert "status 1: rank 1: AssertionError at " in line
    assert line.endswith(f"{cpu_logs['assert'].parent.name}/failing.py:9 in <module>")


def test_a_missing_module_is_named(cpu_logs):
    line = _line(1, cpu_logs["module"])
    assert "rank 1: missing Python module caraml_no_such_module" in line


def _killed_pid(log: Path) -> str:
    return re.search(r"exitcode\s*:\s*-9 \(pid: (\d+)\)", log.read_text()).group(1)


def test_a_killed_rank_is_named_not_the_one_torchrun_stopped_after_it(cpu_logs):
    # rank 0 may or may not see the broken connection before torchrun stops it;
    # either way the row names rank 1 and its signal as the first failure
    line = _line(1, cpu_logs["kill"], samples="256")
    assert "rank 1 killed by SIGKILL" in line and "rank 0 killed" not in line


def test_a_plain_sigkill_is_not_named_the_oom_killer_where_the_cgroup_and_the_kernel_say_none(cpu_logs):
    text = cpu_logs["kill"].read_text()
    pid = _killed_pid(cpu_logs["kill"])
    looked = []

    def judge(pids):
        looked.extend(pids)
        return oom_evidence.judge(text, pids, 2, 2, "[ 1.0] some other kernel line\n")
    line = failure.summary(1, [cpu_logs["kill"]], "256", oom=judge)
    assert looked == [pid]  # the killed rank's process, from torchrun's summary
    assert ("rank 1 killed by SIGKILL on localhost (not by the OOM killer: the job's cgroup counts no "
            "oom_kill and the kernel's log names no killed rank)") in line, line
    assert "memory" not in line.split("SIGKILL")[1].split("(")[0] and "batch" not in line


@pytest.mark.parametrize("at_start, now, kernel, log_line, said_by", [
    (0, 1, None, "", "the job's cgroup counted 1 oom_kill(s) in memory.events"),
    (None, None, "Out of memory: Killed process {pid} (python) total-vm:1kB", "",
     "the kernel's log names the process"),
    (5, 5, "Memory cgroup out of memory: Killed process {pid} (python)", "",
     "the kernel's log names the process"),
    (None, None, None, "slurmstepd: error: Detected 1 oom_kill event in StepId=42.0. Some of the step "
     "tasks have been OOM Killed.", "Slurm counted an oom_kill event in the job's step"),
])
def test_the_oom_killer_is_named_with_the_batch_where_something_says_it_did(
        cpu_logs, at_start, now, kernel, log_line, said_by):
    pid = _killed_pid(cpu_logs["kill"])
    text = cpu_logs["kill"].read_text() + "\n" + log_line
    line = failure._summary(1, text, "256", "job", lambda pids: oom_evidence.judge(
        text, pids, at_start, now, kernel and kernel.format(pid=pid)))
    assert (f"rank 1 killed by SIGKILL on localhost: out of host memory at 256 samples per device (the "
            f"OOM killer: {said_by}): lower the global batch size (or the micro-batch size) or use more "
            "devices") in line, line


def test_a_sigkill_where_nothing_can_be_read_says_it_is_not_known(cpu_logs):
    line = failure.summary(1, [cpu_logs["kill"]], "256", oom=lambda pids: Verdict(False, ""))
    assert "rank 1 killed by SIGKILL on localhost (whether by the OOM killer is not known here" in line



def test_a_rank_killed_on_another_node_is_not_judged_by_this_nodes_cgroup(cpu_logs):
    """failure.py runs on the job's first node: a rank killed on another one
    is neither named nor cleared of the OOM killer by what this node reads;
    Slurm's word in the logs still counts."""
    text = cpu_logs["kill"].read_text().replace("host      : localhost", "host      : cn-other-node")
    assert "cn-other-node" in text
    asked = []

    def here(pids):
        asked.extend(pids)
        return Verdict(False, "the job's cgroup counts no oom_kill")
    line = failure._summary(1, text, "256", "job", here)
    assert asked == []
    assert ("rank 1 killed by SIGKILL on cn-other-node (whether by the OOM killer is not known here: this "
            "node cannot read cn-other-node's cgroup or kernel log)") in line, line
    slurm = text + "\nslurmstepd: error: Detected 1 oom_kill event in StepId=42.0.\n"
    assert "out of host memory at 256 samples per device (the OOM killer: Slurm counted" in failure._summary(
        1, slurm, "256", "job", here)

def test_the_job_cgroup_is_slurms_job_above_its_step_on_v2_and_v1(tmp_path, monkeypatch):
    job = "system.slice/slurmstepd.scope/job_42"
    (tmp_path / job).mkdir(parents=True)
    (tmp_path / job / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    (tmp_path / "self").write_text(f"0::/{job}/step_batch/user/task_0\n")
    monkeypatch.setattr(oom_evidence, "CGROUP_ROOT", tmp_path)
    monkeypatch.setattr(oom_evidence, "PROC_CGROUP", tmp_path / "self")
    assert oom_evidence.cgroup_oom_kills() == 2
    (tmp_path / "memory" / "user.slice").mkdir(parents=True)
    (tmp_path / "memory" / "user.slice" / "memory.oom_control").write_text(
        "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n")
    (tmp_path / "self").write_text("4:memory:/user.slice\n0::/\n")  # a hybrid host: v1's memory
    assert oom_evidence.cgroup_oom_kills() == 7
    (tmp_path / "self").write_text("0::/nowhere\n")
    assert oom_evidence.cgroup_oom_kills() is None


def test_the_cpu_allocators_refusal_is_out_of_memory_with_the_batch(cpu_logs):
    # it once showed the raw "[enforce fail at alloc_cpu.cpp:...]" line
    line = _line(1, cpu_logs["alloc"], samples="4096")
    assert line.endswith("status 1: rank 1: out of memory at 4096 samples per device (CPU): lower "
                         "the global batch size (or the micro-batch size) or use more devices"), line


def test_a_gloo_error_says_which_rank_saw_it_and_which_failed_first(cpu_logs):
    line = _line(1, cpu_logs["gloo"])
    assert "rank 0: communication error (gloo)" in line
    assert "first failure: rank 1 exit code 3" in line
    # the text after the cause stays short: gloo's source position and advice are dropped
    assert ".cc:" not in line and "GLHF" not in line


def test_a_missing_environment_says_to_run_setup(cpu_logs):
    assert "run bash aux/setup.sh" in _line(127, cpu_logs["venv"])
    assert "status 127" in _line(127, cpu_logs["venv"])


def test_cuda_out_of_memory_names_the_batch_per_device_and_what_to_lower():
    line = _line(1, LOGS / "cuda_oom_rank0.err", samples="256")
    assert line.endswith("status 1: rank 0: out of memory at 256 samples per device (CUDA): "
                         "lower the global batch size (or the micro-batch size) or use more devices")


def test_hip_out_of_memory_without_a_rank_prefix():
    assert "out of memory (HIP)" in _line(1, LOGS / "hip_oom.err")


def test_an_nccl_error_names_the_rank_and_the_library():
    line = _line(1, LOGS / "nccl_rank2.err")
    assert "rank 2: communication error (NCCL): torch.distributed.DistBackendError: NCCL error in:" in line


def test_a_signal_is_named_and_the_suites_own_error_comes_first(tmp_path):
    log = tmp_path / "job.err"
    log.write_text("W1123 warning\nCARAML ERROR: data path /x does not exist\nTraceback\nValueError: later\n")
    assert _line(143, log) == "job exited with status 143 (SIGTERM): data path /x does not exist"
    assert _line(137, tmp_path / "missing.err") == "job exited with status 137 (SIGKILL)"


def test_a_signal_to_torchrun_is_named(tmp_path):
    log = tmp_path / "job.err"
    # the tail torchrun 2.x prints when SIGTERM reaches it
    log.write_text(
        "    raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)\n"
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 754 got signal: 15\n")
    assert _line(1, log) == "job exited with status 1: the launcher got SIGTERM and stopped the ranks"



def test_a_requeued_job_fails_by_its_last_attempt_not_by_the_first_ones_end(tmp_path):
    """Slurm appends a requeued job's output to what the attempt a failed
    node stopped wrote: the cause is the last attempt's (its own start line on)."""
    start = "CARAML job: start=2026-11-27T10:00:00+00:00 host={} job_id=7 requeued={}\n"
    log = tmp_path / "job.err"
    log.write_text(start.format("n1", 0) + (LOGS / "nccl_rank2.err").read_text()
                   + start.format("n2", 1) + (LOGS / "cuda_oom_rank0.err").read_text())
    line = _line(1, log, samples="256")
    assert line.endswith("rank 0: out of memory at 256 samples per device (CUDA): "
                         "lower the global batch size (or the micro-batch size) or use more devices"), line
    assert "NCCL" not in line
    # one attempt: its whole output, whatever precedes its start line
    log.write_text("a line before the start\n" + start.format("n1", 0)
                   + (LOGS / "nccl_rank2.err").read_text())
    assert "communication error (NCCL)" in _line(1, log)



def test_a_launcher_stopped_after_a_rank_failed_on_another_node_names_that_rank(tmp_path):
    """srun stops cn1's torchrun (SIGTERM) once cn2's has failed; the nodes'
    lines reach job.err in any order, cn1's signal first as often as not."""
    log = tmp_path / "job.err"
    summary = ("Root Cause (first observed failure):\n[0]:\n  host      : cn2\n"
               "  rank      : 1 (local_rank: 0)\n  exitcode  : -9 (pid: 4242)  (SIGKILL)\n")
    signalled = ("torch.distributed.elastic.multiprocessing.api.SignalException: "
                 "Process 754 got signal: 15\n")
    log.write_text(signalled + summary)
    assert "rank 1 killed by SIGKILL on cn2" in _line(1, log)
    # a signal that stopped the ranks themselves stays the launcher's
    log.write_text(signalled + summary.replace("-9 (pid: 4242)  (SIGKILL)", "-15 (pid: 4242)  (SIGTERM)"))
    assert _line(1, log).endswith("the launcher got SIGTERM and stopped the ranks")

def _run_step(*command: str) -> tuple[int, list[str]]:
    proc = subprocess.run([sys.executable, str(Path(failure.__file__)), "--run", "data step", "--", *command],
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, [ln for ln in proc.stderr.splitlines() if ln.startswith("CARAML ERROR: ")]


def test_a_step_that_crashes_gets_a_one_line_cause_for_its_row():
    code, errors = _run_step(sys.executable, "-c", "import json; json.loads('{')")
    assert code == 1
    assert errors == ["CARAML ERROR: data step exited with status 1: json.decoder.JSONDecodeError: "
                      "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"]


def test_a_step_whose_python_is_missing_says_to_run_setup(tmp_path):
    code, errors = _run_step(str(tmp_path / ".venv" / "bin" / "python"), "-m", "llm_training.data.prepare")
    assert code == 127 and len(errors) == 1 and errors[0].endswith("run bash aux/setup.sh")


def test_a_step_that_names_its_own_error_gets_no_second_one():
    own = "import sys; print('CARAML ERROR: corpus x does not exist', file=sys.stderr); sys.exit(1)"
    code, errors = _run_step(sys.executable, "-c", own)
    assert code == 1 and errors == ["CARAML ERROR: corpus x does not exist"]
