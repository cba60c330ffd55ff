"""A ReFrame check's work package, planned by the benchmark's own JUBE
script, so that a row from ReFrame and a row from JUBE are one measurement.

`jube run SCRIPT --tag SYSTEM TAGS... dryrun` runs the suite's pre-flight
checks and the planner (caraml/login/jobplan.py), which writes the very
job.sh that JUBE would submit (the driver, its options, the launcher, the
container and jpwr's energy), and records the work package's parameters,
which the row model reads. The dry run submits nothing; the check runs that
job.sh in its stage directory and decides the row there
(caraml/row/standalone.py).

A benchmark with a data step (the LLM) names, in its entry of the
benchmark table (caraml/benchmarks.py), the step and the JUBE parameter
that holds its arguments, so the command is its JUBE script's own; it runs where
ReFrame runs (the login node, which can download a corpus), before the
job, as JUBE's data step does, with the variables JUBE exports to it."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from caraml import jube_run
from caraml.benchmark_entry import Benchmark
from caraml.login.host_locks import lock_file, run_jube
from caraml.login.jobplan import ROOT, suite_python
from caraml.report import ERROR_PREFIX

PLAN_DIR = "jube_plan"
# a corpus download and tokenisation may take long, but not for ever
PREPARE_TIMEOUT_S = 4 * 3600
PARAMS_FILE = "params.json"
JOB_SCRIPT = "job.sh"


class PlanError(Exception):
    pass


@dataclass(frozen=True)
class Plan:
    job_script: Path
    params: dict[str, str]
    prepare: list[str]
    # what JUBE exports to the data step (its CARAML_ parameters)
    prepare_env: dict[str, str] = field(default_factory=dict)
    # where the data step runs: the stage's folder named as the step, which
    # the job reads as JUBE's link to the step's work package (@prepare_data/data.args)
    data_folder: Path | None = None


def data_step(params: dict[str, str], name: str) -> tuple[list[str], dict[str, str]]:
    """The data step's arguments as the JUBE script wrote them (its
    parameter NAME, evaluated for the work package), and the variables JUBE
    exports to the step."""
    if name not in params:
        raise PlanError(f"the data step's parameter {name!r} is not one of the work package's: "
                        "fix the benchmark's data step in its entry (caraml/benchmarks.py)")
    return shlex.split(params[name]), {k: v for k, v in params.items() if k.startswith("CARAML_")}


def _execute_work(run_dir: Path) -> Path:
    found = sorted(run_dir.glob("*_execute/work"))
    if len(found) != 1:
        raise PlanError(f"the JUBE plan in {run_dir} has {len(found)} execute work packages, not one: "
                        "a check runs one configuration; give tags that select one")
    return found[0]


def jube_command() -> str:
    jube = shutil.which("jube") or shutil.which("jube", path=str(suite_python().parent))
    if not jube:
        raise PlanError("jube not found: the checks plan their jobs with the suite's JUBE scripts; "
                        "run `source aux/setup.sh` (it installs JUBE) first")
    return jube


def plan(benchmark: Benchmark, tags: list[str], stage: Path, *, timeout_s: float = 300,
         environ: Mapping[str, str] | None = None) -> Plan:
    """Plans one work package in STAGE with a JUBE dry run and leaves there
    the job script and the work package's parameters (params.json)."""
    stage = Path(stage)
    out = stage / PLAN_DIR
    shutil.rmtree(out, ignore_errors=True)
    command = [jube_command(), "run", str(ROOT / benchmark.script), "--hide-animation",
               "-o", str(out), "--tag", *tags, "dryrun"]
    try:
        done = run_jube(command, cwd=ROOT, timeout=timeout_s, env=environ)
    except subprocess.TimeoutExpired:
        raise PlanError(f"planning {benchmark.name} with JUBE took more than {timeout_s:.0f} s: "
                        f"see {out}") from None
    run_dirs = sorted(p for p in out.glob("*") if p.is_dir()) if out.is_dir() else []
    if done.returncode != 0 or not run_dirs:
        raise PlanError(f"planning {benchmark.name} ({shlex.join(command)}) failed: "
                        f"{(done.stderr or done.stdout).strip()[-400:]}")
    work = _execute_work(run_dirs[-1])
    script = work / JOB_SCRIPT
    if not script.exists():
        # the pre-flight refused the work package: its one-line error says why
        raise PlanError(f"JUBE wrote no job script for {benchmark.name} on {' '.join(tags)}: "
                        f"{(work / 'stderr').read_text(errors='replace').strip()[-400:]}")
    every = jube_run.work_packages(run_dirs[-1])
    wp = every[jube_run.work_package_id(work)]
    params = dict(wp.params)
    # the data step's values (where the corpus goes) are its own work package's
    data_params = {**(every[wp.parents[0]].params if wp.parents else {}), **params}
    # the job is run, not only written: the row must not read the plan as a dry run
    params["dry_run"] = "no"
    shutil.copy(script, stage / JOB_SCRIPT)
    (stage / PARAMS_FILE).write_text(json.dumps(params, indent=1) + "\n")
    step = benchmark.data_step
    if step is None or step.args is None:
        return Plan(stage / JOB_SCRIPT, params, [])
    words, exported = data_step(data_params, step.args)
    python = str(suite_python())
    (stage / step.step).mkdir(exist_ok=True)
    failure = ROOT / "caraml" / "job" / "failure.py"
    prepare = [python, str(failure), "--run", "data step", "--", python, *words]
    return Plan(stage / JOB_SCRIPT, params, prepare, exported, stage / step.step)


def seconds(limit: str) -> int:
    """A Slurm time limit (MM, MM:SS, HH:MM:SS, D-HH:MM:SS) in seconds, for ReFrame."""
    days, _, clock = limit.strip().rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if not 1 <= len(parts) <= 3 or (days and not days.isdigit()):
        raise PlanError(f"time limit {limit!r} is not MM, MM:SS, HH:MM:SS or D-HH:MM:SS "
                        "(platform.xml timelimit)")
    if len(parts) == 1:
        parts = [0, parts[0], 0]  # minutes alone, as Slurm reads them
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def prepare_data(planned: Plan, timeout_s: float = PREPARE_TIMEOUT_S) -> None:
    """Runs the data step (where the plan has one) in its folder of the
    stage: data.args for the job, stdout and stderr; a failure raises the
    step's one-line error."""
    folder = planned.data_folder
    if not planned.prepare or folder is None:
        return
    with open(folder / "stdout", "w") as out, open(folder / "stderr", "w") as err:
        try:
            # in its folder, as JUBE's data step runs in its work package
            done = subprocess.run(planned.prepare, cwd=folder, stdout=out, stderr=err, timeout=timeout_s,
                                  env={**os.environ, **planned.prepare_env, "PYTHONPATH": str(ROOT)})
        except subprocess.TimeoutExpired:
            raise PlanError(f"the data step took more than {timeout_s:.0f} s: see {folder / 'stderr'}; "
                            "prepare the data once beforehand (docs/llm_data.md)") from None
    if done.returncode != 0:
        lines = (folder / "stderr").read_text(errors="replace").splitlines()
        ours = [line.removeprefix(ERROR_PREFIX) for line in lines if line.startswith(ERROR_PREFIX)]
        cause = ours[0] if ours else (lines[-1] if lines else f"exit status {done.returncode}")
        raise PlanError(f"the data step failed: {cause} (see {folder / 'stderr'})")


def job_resources(params: dict[str, str]) -> dict[str, object]:
    """What ReFrame's job asks the scheduler for: the job script's #SBATCH
    lines, its warning before the time limit included (--signal=B:USR1:
    the check runs job.sh as the batch shell itself, whose trap passes the
    warning on to the ranks, as under JUBE)."""
    nodes, tasks = int(params["nodes"]), int(params["tasks_per_node"])
    return {"num_tasks": nodes * tasks, "num_tasks_per_node": tasks,
            "num_cpus_per_task": int(params["cpus_per_task"]),
            "time_limit": seconds(params["job_timelimit"]),
            "options": [f"--{option}={params[name]}" for option, name in
                        (("gres", "gres"), ("gpus-per-task", "gpus_per_task"))
                        if params.get(name, "").strip()]
            + [f"--signal=B:USR1@{int(params['signal_lead_s'])}"]}


def local_lock() -> Path:
    """The lock that jobs of this host's local partitions hold while they
    run (flock), so that two partitions of one host never measure each other."""
    return lock_file("local-jobs")


def run_row_model(benchmark: str, stage: Path, timeout_s: float = 900) -> Path:
    """Decides the row of the job that ran in STAGE with the row model, as
    JUBE's combine step does (caraml/row/standalone.py): row.json and the
    `CARAML row` lines in row.out."""
    stage = Path(stage)
    with open(stage / "row.out", "w") as out:
        subprocess.run([str(suite_python()), "-m", "caraml.row.standalone", "--benchmark", benchmark,
                        "--params", PARAMS_FILE, "."], cwd=stage, stdout=out, stderr=subprocess.STDOUT,
                       timeout=timeout_s, env={**os.environ, "PYTHONPATH": str(ROOT)})
    row = stage / "row.json"
    if not row.exists():
        raise PlanError(f"the row model wrote no row.json: see {stage / 'row.out'}")
    return row
