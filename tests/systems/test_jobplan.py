"""The job planner (caraml/login/jobplan.py) without JUBE: the job script it
writes from a work package's facts, with checkouts and data under names that
would run commands if pasted into shell source, the suite's Python it picks,
and the one-line errors for facts it cannot use."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from caraml.login import jobplan

# a name that runs commands wherever it reaches shell or Python source unquoted
HOSTILE = ("it's ;touch PWNED1;(x) $(touch PWNED2) `touch PWNED3` \"q\" "
           "'+str(__import__('os').system('touch PWNED4'))+'")

FACTS = {
    "job_name": "caraml_t_0", "nodes": "1", "tasks_per_node": "1", "cpus_per_task": "8",
    "job_timelimit": "00:20:00", "signal_lead_s": "120", "partition": "", "account": "",
    "gres": "", "gpus_per_task": "", "additional_sbatch": "", "system_name": "CPU",
    "system_description": "this host", "submit_mode": "local", "dry_run": "no",
    "building_container": "no", "out_file": "job.out", "err_file": "job.err",
    "done_file": "ready", "error_file": "error", "samples_per_device": "4",
    "threads_per_proc": "8", "procs_per_task": "1", "device_kind": "cpu",
    "devices_per_node": "1", "visible_devices": "", "master_addr_suffix": "", "env_setup": "",
    "launcher": "torchrun",
    "container": "", "container_flags": "", "container_python": "python3", "jpwr_python": "",
    "energy_methods": "auto", "energy_dir": "energy", "node_meter": "none", "srun_flags": "",
    "srun_env": "",
    "data": "synthetic", "job_command": '-m some.driver --data "$CARAML_DATA"',
    "job_precision": "", "power_limit": "", "power_limit_mode": "suite", "power_limit_scope": "gpu",
    "power_limit_sbatch": "", "tdp_w": "", "devices_per_package": "1",
}


def write_facts(path: Path, **changes: str) -> Path:
    facts = {**FACTS, "caraml_root": str(path.parent), "rundir": str(path.parent), **changes}
    path.write_text("".join(f"{k}={v}\n" for k, v in facts.items()))
    return path


def launch(job: str) -> list[str]:
    [line] = [ln for ln in job.splitlines() if ln.endswith(" &") and not ln.startswith(" ")]
    return shlex.split(line[:-1])


def shell_values(job_sh: Path, *names: str) -> list[str]:
    """What bash makes of the job script's variable block."""
    text = job_sh.read_text()
    block = text[text.index("\nCARAML_ROOT="):text.index("\nexport PYTHONPATH")]
    out = subprocess.run(["bash", "-c", block + "\nprintf '%s\\0' " +
                          " ".join(f'"${n}"' for n in names)],
                         cwd=job_sh.parent, capture_output=True, text=True, check=True).stdout
    return out.split("\0")[:-1]


@pytest.mark.parametrize("container", ["", "nvidia_x86"])
def test_hostile_paths_are_taken_as_they_are(tmp_path, container, monkeypatch):
    root = tmp_path / HOSTILE / "checkout"
    rundir = tmp_path / HOSTILE / "run"
    for folder in (root, rundir):
        folder.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CARAML_VENV", raising=False)
    monkeypatch.setenv("CARAML_CONTAINER_BINDS", "/data/x")
    facts = write_facts(rundir / "job.facts", caraml_root=str(root), rundir=str(rundir),
                        data=HOSTILE, container=container, submit_mode="slurm",
                        container_flags="--nv" if container else "")
    job = jobplan.job_script(jobplan.read_facts(facts))
    (rundir / "job.sh").write_text(job)
    subprocess.run(["bash", "-n", str(rundir / "job.sh")], check=True)
    assert shell_values(rundir / "job.sh", "CARAML_ROOT", "CARAML_RUNDIR", "CARAML_DATA") == \
        [str(root), str(rundir), HOSTILE]
    argv = launch(job)
    if container:
        binds = [argv[i + 1] for i, word in enumerate(argv) if word == "--bind"]
        assert binds == [str(root), str(rundir), "/data/x"]
        assert str(root / "containers" / "caraml_nvidia_x86.sif") in argv
        assert argv[argv.index("--ignore-signal=USR1") + 1] == "python3"
    else:
        assert str(root / ".venv" / "bin" / "python") in argv
    assert argv[-2:] == ["--data", "$CARAML_DATA"]
    assert not list(tmp_path.rglob("PWNED*"))


def test_the_job_script_says_what_the_system_asks_for(tmp_path):
    facts = write_facts(tmp_path / "job.facts", submit_mode="slurm", partition="dc-gpu",
                        account="proj", gres="gpu:4", device_kind="cuda", devices_per_node="4",
                        procs_per_task="4", launcher="torchrun-jsc", master_addr_suffix="i",
                        additional_sbatch="#SBATCH --constraint=x",
                        env_setup="export NCCL_SOCKET_IFNAME=ib0",
                        srun_flags="--mpi=pspmix", srun_env="env PMIX_SECURITY_MODE=native")
    job = jobplan.job_script(jobplan.read_facts(facts))
    assert "\n#SBATCH --signal=B:USR1@120\n#SBATCH --partition=dc-gpu\n#SBATCH --account=proj\n" \
           "#SBATCH --gres=gpu:4\n#SBATCH --constraint=x\n" in job
    assert "\nexport CUDA_VISIBLE_DEVICES=0,1,2,3\n" in job
    assert "\nexport NCCL_SOCKET_IFNAME=ib0\n" in job
    assert "\nMASTER_ADDR_SUFFIX=i\n" in job
    assert " ".join(launch(job)).startswith(
        "srun --kill-on-bad-exit=1 --mpi=pspmix env PMIX_SECURITY_MODE=native env "
        f"--ignore-signal=USR1 {tmp_path}/.venv/bin/python -m torchrun_jsc --nnodes=1 "
        "--nproc-per-node=4 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT ")
    # a task per GPU (gpus_per_task): Slurm binds the devices, none are named
    facts = write_facts(tmp_path / "job.facts", device_kind="cuda", gpus_per_task="1")
    assert "VISIBLE_DEVICES" not in jobplan.job_script(jobplan.read_facts(facts))


# JUBE's value of a list holds `;` for its commas (report.parameter)
@pytest.mark.parametrize("granted, exported", [
    ("1", "1"), ("GPU-cccc;GPU-aaaa", "GPU-cccc,GPU-aaaa"), ("0;1;2;3", "0,1,2,3"),
    ("MIG-GPU-aaaa/1/0", "MIG-GPU-aaaa/1/0"), ("", "0,1")])
def test_a_host_that_granted_some_gpus_exports_those_and_no_others(tmp_path, granted, exported):
    facts = write_facts(tmp_path / "job.facts", device_kind="cuda", devices_per_node="2",
                        visible_devices=granted)
    job = jobplan.job_script(jobplan.read_facts(facts))
    [line] = [ln for ln in job.splitlines() if "CUDA_VISIBLE_DEVICES=" in ln]
    assert shlex.split(line) == ["export", f"CUDA_VISIBLE_DEVICES={exported}"]


@pytest.mark.parametrize("kind, precision, building, exported", [
    ("rocm", "tf32", "no", True), ("rocm", "bf16", "no", False), ("rocm", "fp32", "no", False),
    ("cuda", "tf32", "no", False), ("rocm", "tf32", "yes", False), ("rocm", "", "no", False)])
def test_rocm_gets_tf32_only_where_the_job_asks_for_tf32(tmp_path, kind, precision, building,
                                                        exported):
    """ROCm's torch uses TF32 only with HIPBLASLT_ALLOW_TF32=1: a tf32 job
    must have it, a bf16 or fp32 job must not (its fp32 ops stay IEEE)."""
    facts = write_facts(tmp_path / "job.facts", device_kind=kind, devices_per_node="2",
                        job_precision=precision, building_container=building)
    job = jobplan.job_script(jobplan.read_facts(facts))
    lines = [shlex.split(ln) for ln in job.splitlines() if "HIPBLASLT_ALLOW_TF32" in ln]
    assert lines == ([["export", "HIPBLASLT_ALLOW_TF32=1"]] if exported else [])
    # exported before the launch, so the ranks (and a container) inherit it
    if exported:
        assert job.index("HIPBLASLT_ALLOW_TF32") < job.index(" &\nchild=$!")


def test_a_value_with_a_line_break_is_refused_with_one_line(tmp_path, capsys):
    facts = write_facts(tmp_path / "job.facts", env_setup="export A=1\nexport B=2")
    assert jobplan.main(["submit", str(facts)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("CARAML ERROR: job.facts line ")
    assert "line break" in err and not (tmp_path / "job.sh").exists()


def test_an_sbatch_option_with_a_space_is_refused(tmp_path, capsys):
    facts = write_facts(tmp_path / "job.facts", account="my project")
    assert jobplan.main(["submit", str(facts)]) == 2
    assert "#SBATCH --account needs one word" in capsys.readouterr().err


def test_a_dry_run_writes_the_script_and_ends_the_step(tmp_path, capsys):
    """The step's done file: JUBE sees the dry run finished, not running for ever."""
    facts = write_facts(tmp_path / "job.facts", dry_run="yes")
    assert jobplan.main(["submit", str(facts)]) == 0
    assert (tmp_path / "ready").exists() and (tmp_path / "job.sh").exists()
    assert capsys.readouterr().err == \
        f"CARAML dryrun: {tmp_path}/job.sh written and not submitted\n"


@pytest.mark.parametrize("system, account, warned", [
    ("A100", "", True), ("A100", "myproject", False), ("CPU", "", False), ("MILA", "", False)])
def test_a_job_without_the_account_its_system_needs_warns_once_with_what_to_set(
        tmp_path, capsys, system, account, warned):
    facts = write_facts(tmp_path / "job.facts", dry_run="yes", system_name=system, account=account)
    assert jobplan.main(["submit", str(facts)]) == 0
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith("CARAML warning: ")]
    if warned:
        assert warnings == [f"CARAML warning: no --account line: {system}'s partitions refuse such "
                            "a job; export CARAML_ACCOUNT=<your Slurm project> and run again"]
    else:
        assert warnings == []


def test_the_suite_python_honours_caraml_venv(tmp_path):
    assert jobplan.suite_python(tmp_path, {}) == tmp_path / ".venv" / "bin" / "python"
    assert jobplan.suite_python(tmp_path, {"CARAML_VENV": "/opt/env"}) == \
        Path("/opt/env/bin/python")


def _fake_venv(tmp_path: Path) -> Path:
    """A virtual environment whose Python says it was the one that ran."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\necho "ran by the venv" >&2\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    return tmp_path / "venv"


def _run_tool(tmp_path: Path, venv: Path, *args: str) -> subprocess.CompletedProcess:
    tool = tmp_path / "tool.py"
    tool.write_text("import sys; print(sys.argv[1:])\n")
    env = {**os.environ, "CARAML_VENV": str(venv)}
    return subprocess.run([sys.executable, str(Path(jobplan.__file__)), "run", *args,
                           str(tool), "a b"], env=env, capture_output=True, text=True)


def test_login_tools_run_with_the_suites_python(tmp_path):
    proc = _run_tool(tmp_path, _fake_venv(tmp_path))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "['a b']\n", "ran by the venv\n")


def test_without_the_environment_a_tool_that_needs_it_fails_with_one_line(tmp_path):
    proc = _run_tool(tmp_path, tmp_path / "missing", "--need-venv")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (f"CARAML ERROR: the suite's environment is missing "
                           f"({tmp_path}/missing/bin/python not found): run bash aux/setup.sh "
                           "or set CARAML_VENV to the environment it made\n")
    # the checks themselves run without it, and say what is missing
    proc = _run_tool(tmp_path, tmp_path / "missing")
    assert (proc.returncode, proc.stdout) == (0, "['a b']\n")


# --- power limits: the guard, a sweep refused its privilege, the centre's limit ----------------


def _guard_lines(job: str) -> list[str]:
    return [ln.strip() for ln in job.splitlines() if "caraml.job.power_guard guard" in ln]


@pytest.mark.parametrize("changes, guarded", [
    ({}, False),  # a CPU job that sets no limit
    ({"device_kind": "cuda"}, True), ({"device_kind": "rocm"}, True),  # every GPU job
    ({"power_limit": "0.6"}, True),  # a point, wherever it runs
    ({"device_kind": "cuda", "building_container": "yes"}, False),
])
def test_a_gpu_job_or_a_sweep_point_starts_a_power_guard_before_its_launcher(tmp_path, changes, guarded):
    job = jobplan.job_script(jobplan.read_facts(write_facts(tmp_path / "job.facts", **changes)))
    lines = _guard_lines(job)
    assert len(lines) == int(guarded)
    if guarded:
        assert job.index(lines[0]) < job.index(" &\nchild=$!") < job.index("\nend_guard\n")
        assert shlex.split(lines[0].removesuffix(" &"))[-2:] == ["--watch-pid", "$$"]
    subprocess.run(["bash", "-n"], input=job, text=True, check=True)


def test_under_slurm_the_guard_is_one_task_a_node_beside_the_job_with_every_gpu(tmp_path):
    facts = write_facts(tmp_path / "job.facts", submit_mode="slurm", nodes="2", device_kind="cuda",
                        devices_per_node="4", gpus_per_task="1", container="nvidia_arm64",
                        container_flags="--nv", srun_flags="--mpi=pmi2")
    [line] = _guard_lines(jobplan.job_script(jobplan.read_facts(facts)))
    words = shlex.split(line.removesuffix(" &"))
    assert words[:7] == ["srun", "--overlap", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1",
                         "--gpus-per-task=4", "--mpi=pmi2"]
    assert words[words.index("apptainer"):][:2] == ["apptainer", "exec"]  # where the bindings are
    assert words[-6:] == ["python3", "-m", "caraml.job.power_guard", "guard", "--dir", "."]


def test_after_a_point_refused_its_privilege_the_sweeps_other_points_do_not_run(tmp_path, capsys):
    line = "point 0.6 was refused: setting the power limit of gpu0 needs root: the centre must provide it"
    (tmp_path / "power_limit_refused").write_text(line + "\n")
    facts = write_facts(tmp_path / "job.facts", power_limit="0.7",
                        caraml_root=str(Path(jobplan.__file__).resolve().parents[2]))
    # a point not yet submitted is not: the row says why
    assert jobplan.main(["submit", str(facts)]) == 2
    assert capsys.readouterr().err == f"CARAML ERROR: not submitted: {line}\n"
    assert not (tmp_path / "job.sh").exists()
    # one already queued (Slurm) ends at its start, before any process of its own
    (tmp_path / "job.sh").write_text(jobplan.job_script(jobplan.read_facts(facts)))
    with open(tmp_path / "job.out", "w") as out, open(tmp_path / "job.err", "w") as err:  # as sbatch's
        ran = subprocess.run(["bash", "job.sh"], cwd=tmp_path, stdout=out, stderr=err, timeout=120)
    assert ran.returncode == 2
    assert f"CARAML ERROR: not run: {line}" in (tmp_path / "job.err").read_text()
    assert (tmp_path / "ready").exists() and f"not run: {line}" in (tmp_path / "error").read_text()
    # the default point sets nothing, and a point the centre sets needs no privilege of the job's
    for changes in ({"power_limit": "0.7", "power_limit_mode": "external"}, {}):
        assert "POWER_LIMIT_REFUSED=''" in jobplan.job_script(jobplan.read_facts(
            write_facts(tmp_path / "job.facts", **changes)))


@pytest.mark.parametrize("point, scope, per, line", [
    ("0.5", "gpu", "1", "#SBATCH --gpu-power-limit=350"),  # W per device
    ("400", "package", "2", "#SBATCH --gpu-power-limit=400"),
    ("0.5", "package", "2", "#SBATCH --gpu-power-limit=700"),  # a card's: 2 x 700 W x 0.5
    ("default", "gpu", "1", None),  # the default point asks the centre for nothing
])
def test_in_external_mode_the_job_asks_the_centre_for_its_point(tmp_path, point, scope, per, line):
    facts = write_facts(tmp_path / "job.facts", submit_mode="slurm", power_limit=point,
                        power_limit_mode="external", power_limit_scope=scope, devices_per_package=per,
                        power_limit_sbatch="gpu-power-limit", tdp_w="700")
    job = jobplan.job_script(jobplan.read_facts(facts))
    asked = [ln for ln in job.splitlines() if "power-limit" in ln and ln.startswith("#SBATCH")]
    assert asked == ([line] if line else [])
