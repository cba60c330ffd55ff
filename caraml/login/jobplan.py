"""The job planner: makes a work package's job script from its system's facts
and starts it (bash on this node, sbatch, or not at all for a dry run).

JUBE writes the facts into `job.facts` (one `name=value` a line, see
platform.xml, parameter job_facts); nothing JUBE knows is pasted into Python
or shell source. Every path and user-given value reaches `job.sh` through
shlex.quote, so a checkout under a name with quotes, spaces, `;` or
parentheses is run as it is. What stays raw is shell that platform.xml or a
benchmark script writes as shell on purpose: env_setup, srun_flags,
srun_env, container_flags and the benchmark's job_command.

It also picks the Python the suite's tools run with on the node that runs
JUBE (`run`): CARAML_VENV's, else the checkout's .venv.

    python3 caraml/login/jobplan.py submit job.facts
    python3 caraml/login/jobplan.py run [--need-venv] (TOOL.py | -m MODULE) ARGS...

Standard library only: the login node's python3 runs it before any
environment is known to work."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from caraml import power_limit, report, rocm_tf32
from caraml.job import node_energy
from caraml.login import room, systems
from caraml.row.evidence import SIGNAL_FILE

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "aux" / "job.sh.in"

# the facts a job script needs; job.facts must name each once
FACTS = (
    "job_name", "nodes", "tasks_per_node", "cpus_per_task", "job_timelimit", "signal_lead_s",
    "partition", "account", "gres", "gpus_per_task", "additional_sbatch",
    "system_name", "system_description", "submit_mode", "dry_run", "building_container",
    "caraml_root", "rundir", "out_file", "err_file", "done_file", "error_file",
    "samples_per_device", "threads_per_proc", "procs_per_task", "device_kind",
    "devices_per_node", "visible_devices", "master_addr_suffix", "env_setup", "launcher",
    "container", "container_flags", "container_python", "jpwr_python", "energy_methods",
    "energy_dir", "node_meter", "srun_flags", "srun_env", "data", "job_command", "job_precision",
    "power_limit", "power_limit_mode", "power_limit_scope", "power_limit_sbatch", "tdp_w",
    "devices_per_package",
)

# which devices a process sees, unless Slurm binds them per task
VISIBLE_DEVICES = {"cuda": "CUDA_VISIBLE_DEVICES", "rocm": "HIP_VISIBLE_DEVICES"}


class PlanError(Exception):
    pass


def read_facts(path: Path) -> dict[str, str]:
    """name=value lines; a value that spans lines (a line break in a path or
    a parameter) cannot be told from the next fact, so it is refused."""
    facts: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or name not in FACTS:
            raise PlanError(f"{path.name} line {number} is not one of the job's facts "
                            f"(name=value): {line[:60]!r}; a value of platform.xml or of the "
                            "environment holds a line break, which a job cannot take")
        if name in facts:
            raise PlanError(f"{path.name} names {name} twice")
        facts[name] = value
    missing = [name for name in FACTS if name not in facts]
    if missing:
        raise PlanError(f"{path.name} lacks {', '.join(missing)} (platform.xml, parameter job_facts)")
    return facts


def suite_python(root: Path = ROOT, environ: os._Environ | dict[str, str] = os.environ) -> Path:
    """The suite's virtual environment's Python: CARAML_VENV's, else <checkout>/.venv's."""
    venv = environ.get("CARAML_VENV") or str(root / ".venv")
    return Path(venv) / "bin" / "python"


def container_image(root: Path, container: str) -> Path:
    return root / "containers" / f"caraml_{container}.sif"


def container_definition(root: Path, container: str) -> Path:
    return root / "containers" / f"{container}.def"


def sbatch_lines(f: dict[str, str]) -> list[str]:
    options = [("job-name", "job_name"), ("nodes", "nodes"), ("ntasks-per-node", "tasks_per_node"),
               ("cpus-per-task", "cpus_per_task"), ("time", "job_timelimit"),
               ("output", "out_file"), ("error", "err_file")]
    # the options that only exist where the system has a value
    options += [(option, name) for option, name in [
        ("partition", "partition"), ("account", "account"), ("gres", "gres"),
        ("gpus-per-task", "gpus_per_task")] if f[name].strip()]
    for option, name in options:
        if not f[name] or len(f[name].split()) != 1:
            raise PlanError(f"#SBATCH --{option} needs one word, not {f[name]!r}: fix {name} "
                            "in platform.xml (the account: CARAML_ACCOUNT)")
    lines = [f"#SBATCH --{option}={f[name]}" for option, name in options]
    lines.insert(7, f"#SBATCH --signal=B:USR1@{int(f['signal_lead_s'])}")
    if f["additional_sbatch"].strip():
        lines.append(f["additional_sbatch"])
    return lines + external_limit_line(f)


def external_limit_line(f: dict[str, str]) -> list[str]:
    """In power_limit_mode external, the point's W per device through the
    sbatch option the centre's SPANK plugin or prolog reads
    (power_limit_sbatch); none for the default point or without an option."""
    option = f["power_limit_sbatch"].strip().removeprefix("--")
    if not option or f["power_limit_mode"] != power_limit.EXTERNAL or not f["power_limit"].strip():
        return []
    if len(option.split()) != 1:
        raise PlanError(f"power_limit_sbatch {option!r} is not one sbatch option name (platform.xml)")
    tdp = power_limit.point_tdp_w(float(f["tdp_w"]) if f["tdp_w"].strip() else None,
                                  f["power_limit_scope"], int(f["devices_per_package"] or 1))
    try:
        watts = power_limit.asked_w(f["power_limit"].strip(), tdp)
    except report.BenchmarkInputError as err:
        raise PlanError(str(err)) from None
    return [] if watts is None else [f"#SBATCH --{option}={watts:g}"]


def variables(f: dict[str, str], root: Path) -> list[str]:
    """What job.sh.in reads as shell variables, each value quoted."""
    rundir = Path(f["rundir"])
    values = {
        "CARAML_ROOT": str(root),
        "CARAML_RUNDIR": str(rundir),
        "CARAML_DATA": f["data"],
        "OUT_FILE": f["out_file"],
        "ERR_FILE": f["err_file"],
        "ERROR_FILE": f["error_file"],
        "DONE_FILE": f["done_file"],
        # the signals that reached the job script (caraml/row/ reads it)
        "SIGNAL_FILE": SIGNAL_FILE,
        "SAMPLES_PER_DEVICE": f["samples_per_device"],
        # the nodes' energy as Slurm meters it, beside the energy folder
        # (caraml/job/node_energy.py), and the meter platform.xml declares
        "NODE_ENERGY_FILE": node_energy.FILE_NAME,
        "NODE_METER": f["node_meter"],
        "SUBMIT_MODE": f["submit_mode"],
        "MASTER_ADDR_SUFFIX": f["master_addr_suffix"],
        # the power guard's records, one a node (caraml/job/power_guard.py)
        "GUARD_FILES": power_limit.GUARD_FILES,
        # an earlier point of the sweep found no privilege: this one does not run
        "POWER_LIMIT_REFUSED": str(power_limit.refusal_marker(rundir)) if refused_here(f) else "",
    }
    return [f"{name}={shlex.quote(value)}" for name, value in values.items()]


def device_env(f: dict[str, str]) -> str:
    """The devices the job's processes see: those the host granted (LOCAL's
    visible_devices: indices, UUIDs or MIG ids), else the node's first
    devices_per_node."""
    name = VISIBLE_DEVICES.get(f["device_kind"])
    if not name or f["gpus_per_task"].strip():
        return ""
    # JUBE's value holds the list with `;` for its commas (report.parameter)
    granted = report.parameter_list(f["visible_devices"])
    return f"export {name}=" + shlex.quote(
        ",".join(granted or [str(i) for i in range(int(f["devices_per_node"]))]))


def precision_env(f: dict[str, str]) -> str:
    """What the job's precision needs in the environment (ROCm's TF32); a
    container job inherits it from the job script."""
    if f["building_container"] == "yes":
        return ""
    exports = rocm_tf32.exports(f["device_kind"], f["job_precision"])
    return " ".join(["export", *(f"{k}={shlex.quote(v)}" for k, v in exports.items())]) \
        if exports else ""


def python_for_job(f: dict[str, str], root: Path) -> str:
    return f["container_python"] if f["container"] else str(suite_python(root))


def launcher_words(f: dict[str, str], python: str) -> list[str]:
    """The launcher and its Python, quoted; $-references are the job's own variables."""
    # Under srun Slurm's warning ahead of the time limit (USR1) reaches every
    # process of the step (job.sh.in); torchrun would die of it and leave its
    # workers to be killed, so it ignores USR1 and only the workers stop.
    ignore = ["env", "--ignore-signal=USR1"] if f["submit_mode"] == "slurm" else []
    py = shlex.quote(python)
    procs = [f"--nnodes={int(f['nodes'])}", f"--nproc-per-node={int(f['procs_per_task'])}"]
    # torchrun-jsc adds each node's own part of the rendezvous from its
    # SLURM_NODEID, so nothing node-specific is written here
    rendezvous = ["--rdzv-backend=c10d", "--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT",
                  "--rdzv-id=$SLURM_JOB_ID"]
    launcher = f["launcher"]
    if launcher == "torchrun":
        return ignore + [py, "-m", "torch.distributed.run"] + procs + (
            ["--standalone"] if f["submit_mode"] == "local" else rendezvous)
    if launcher == "torchrun-jsc":
        return ignore + [py, "-m", "torchrun_jsc"] + procs + rendezvous
    if launcher == "srun":
        return [py]
    if launcher == "jpwr":
        energy = shlex.quote(f["jpwr_python"] or python)
        return [energy, "-m", "jpwr", "--methods", *map(shlex.quote, f["energy_methods"].split()),
                "--df-out", shlex.quote(f["energy_dir"]), "--df-suffix", "_rank%q{SLURM_PROCID}",
                "--", py]
    raise PlanError(f"unknown launcher {launcher!r} for {f['system_name']}; "
                    "platform.xml knows torchrun, torchrun-jsc, srun and jpwr")


def guarded(f: dict[str, str]) -> bool:
    """Whether the job starts a power guard on each node: a job on GPUs, or
    one that asks for a power limit (caraml/job/power_guard.py)."""
    return f["building_container"] != "yes" and (
        f["device_kind"] in VISIBLE_DEVICES or bool(f["power_limit"].strip()))


def refused_here(f: dict[str, str]) -> bool:
    """Whether the job sets a power limit itself, and so does not run once
    an earlier point of its sweep found no privilege to."""
    return bool(f["power_limit"].strip()) and f["power_limit_mode"] == power_limit.SUITE


def guard_line(f: dict[str, str], root: Path) -> str:
    """The command that starts the power guard: one per node, beside the
    job's own step under Slurm (--overlap: it holds no CPU or GPU of its
    own), watching the job script without Slurm; empty where none runs."""
    if not guarded(f):
        return ""
    python = shlex.quote(python_for_job(f, root))
    guard = [python, "-m", "caraml.job.power_guard", "guard", "--dir", "."]
    if f["submit_mode"] != "slurm":
        return " ".join(container_words(f, root) + guard + ["--watch-pid", "$$"])
    nodes = int(f["nodes"])
    # every GPU of the job on the node: a job of one GPU per task would give its one task one
    gpus = [f"--gpus-per-task={int(f['devices_per_node'])}"] if f["gpus_per_task"].strip() else []
    srun = ["srun", "--overlap", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
            *gpus, f["srun_flags"], f["srun_env"]]
    return " ".join(word for word in srun + container_words(f, root) + guard if word.strip())


def container_words(f: dict[str, str], root: Path) -> list[str]:
    """apptainer exec with everything the container sees: the checkout, this
    run's folder and what CARAML_CONTAINER_BINDS adds (space-separated)."""
    if not f["container"]:
        return []
    binds = [str(root), f["rundir"], *os.environ.get("CARAML_CONTAINER_BINDS", "").split()]
    words = ["apptainer", "exec", f["container_flags"]]
    for path in binds:
        words += ["--bind", shlex.quote(path)]
    words += ["--env", shlex.quote(f"PYTHONPATH={root}"),
              "--env", f"OMP_NUM_THREADS={int(f['threads_per_proc'])}",
              shlex.quote(str(container_image(root, f["container"])))]
    return words


def launch_line(f: dict[str, str], root: Path) -> str:
    python = python_for_job(f, root)
    srun = (["srun", "--kill-on-bad-exit=1", f["srun_flags"], f["srun_env"]]
            if f["submit_mode"] == "slurm" else [])
    if f["building_container"] == "yes":
        # the container tag's job builds the image and checks it on a node of the system
        energy = f["jpwr_python"] or python
        work = ["bash", shlex.quote(str(root / "containers" / "build.sh")),
                shlex.quote(str(container_definition(root, f["container"]))),
                shlex.quote(str(container_image(root, f["container"]))),
                shlex.quote(f["device_kind"]), shlex.quote(python), shlex.quote(energy),
                f["container_flags"]]
    else:
        work = container_words(f, root) + launcher_words(f, python) + [f["job_command"]]
    return " ".join(word for word in srun + work if word.strip())


def job_script(f: dict[str, str], template: Path = TEMPLATE) -> str:
    root = Path(f["caraml_root"]).resolve()
    description = " ".join(f"{f['system_name']}: {f['system_description']}".split())
    parts = {
        "#SBATCH_LINES#": "\n".join(sbatch_lines(f)),
        "#DESCRIPTION#": description,
        "#VARIABLES#": "\n".join(variables(f, root)),
        "#THREADS_PER_PROC#": str(int(f["threads_per_proc"])),
        "#DEVICE_ENV#": device_env(f),
        "#PRECISION_ENV#": precision_env(f),
        "#ENV_SETUP#": f["env_setup"],
        # the guard in the background, or nothing where none runs (guard_nodes 0)
        "#GUARD#": f"{guard_line(f, root)} &" if guarded(f) else ":",
        "#GUARD_NODES#": str(int(f["nodes"]) if f["submit_mode"] == "slurm" else 1)
        if guarded(f) else "0",
        "#LAUNCH#": launch_line(f, root),
    }
    # one pass: a value that holds a placeholder's name stays as it is
    return re.sub("|".join(map(re.escape, parts)), lambda m: parts[m.group(0)],
                  template.read_text())


def account_warning(f: dict[str, str]) -> str | None:
    """A job without an account on a system whose partitions refuse one
    (platform.xml, account_required): what to set."""
    system = systems.load().get(f["system_name"])
    if f["account"].strip() or system is None or system.params.get("account_required") != "yes":
        return None
    return (f"no --account line: {f['system_name']}'s partitions refuse such a job; "
            "export CARAML_ACCOUNT=<your Slurm project> and run again")


def submit(facts_path: Path) -> int:
    """Writes job.sh beside the facts and starts it the system's way."""
    facts = read_facts(facts_path)
    refused = power_limit.refused_before(Path(facts["rundir"])) if refused_here(facts) else None
    if refused and facts["dry_run"] != "yes":
        raise PlanError(f"not submitted: {refused}")
    work = facts_path.resolve().parent
    job = work / "job.sh"
    job.write_text(job_script(facts))
    job.chmod(0o755)
    systems.write_block(facts["system_name"], work)
    warning = account_warning(facts)
    if warning:
        report.warning(warning)
    if facts["dry_run"] == "yes":
        print(f"CARAML dryrun: {job} written and not submitted", file=sys.stderr)
        # the step's done file: a dry run is finished once its script is written
        (work / facts["done_file"]).touch()
        return 0
    if facts["submit_mode"] == "local":
        wait_s = room.wait_s()  # a bad setting refused before the job, not after it
        # the job's own failure is in its error file (job.sh.in, finish)
        with open(work / facts["out_file"], "wb") as out, open(work / facts["err_file"], "wb") as err:
            # a shell cannot trap a signal it was started ignoring: a `jube run`
            # started in the background of a script ignores Ctrl-C's SIGINT,
            # which the launcher, setting its own handler, would still get
            run_local(subprocess.Popen(["bash", str(job)], cwd=work, stdout=out, stderr=err,
                                       preexec_fn=_default_sigint))
        # what follows writes into the work folder: on a full disk the
        # finished job's row and energy would be lost to a JUBE error
        room.wait_for_room(work, wait_s)
        return 0
    if facts["submit_mode"] == "slurm":
        return sbatch(work, facts)
    raise PlanError(f"submit_mode {facts['submit_mode']!r} of {facts['system_name']} is "
                    "neither local nor slurm (platform.xml)")


# sbatch's reason for a refusal -> what to change, for facts f
REFUSALS: dict[str, Callable[[dict[str, str]], str]] = {
    "Invalid account or account/partition combination": lambda f: (
        f"submit with an account that may use partition {f['partition'] or '(the default)'}: "
        "set CARAML_ACCOUNT (sacctmgr show associations user=$USER lists yours; "
        "scontrol show partition its AllowAccounts)"),
    "Invalid partition name": lambda f: (
        f"fix the partition {f['partition']!r} of {f['system_name']} in platform.xml "
        "(sinfo -s lists this cluster's)"),
    "Requested time limit is invalid": lambda f: (
        f"lower the time limit {f['job_timelimit']} to at most the partition's MaxTime "
        f"(scontrol show partition {f['partition']})"),
}


def sbatch(work: Path, facts: dict[str, str]) -> int:
    """Submits job.sh; a refusal is one line with sbatch's own reason and
    the fix, which the row names (its job never reaches the queue)."""
    try:
        done = subprocess.run(["sbatch", "job.sh"], cwd=work, capture_output=True, text=True,
                              timeout=300)
    except subprocess.TimeoutExpired:
        raise PlanError("sbatch did not answer within 300 s: the Slurm controller is not "
                        "reachable; try again when scontrol ping says it is UP") from None
    sys.stdout.write(done.stdout)
    if done.returncode == 0:
        sys.stderr.write(done.stderr)
        return 0
    said = [line.split("error:", 1)[-1].strip() for line in done.stderr.splitlines() if line.strip()]
    reason = said[-1].removeprefix("Batch job submission failed:").strip() if said else \
        f"exit status {done.returncode}"
    fix = next((fix(facts) for known, fix in REFUSALS.items() if reason.startswith(known)),
               f"fix the job's Slurm options in platform.xml ({work / 'job.sh'})")
    raise PlanError(f"sbatch refused the job: {reason}; {fix}")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_local(job: subprocess.Popen) -> None:
    """Waits for a local job. A Ctrl-C reaches the job script too, which
    stops its ranks at an iteration's end and writes their figures: this
    waits for that rather than killing it (subprocess.run would send SIGKILL,
    and the row would name SIGKILL, not the Ctrl-C). A second Ctrl-C waits on
    as well; the job's own end is bounded by its ranks' iteration."""
    while True:
        try:
            job.wait()
            return
        except KeyboardInterrupt:
            print(f"CARAML: interrupted: waiting for job {job.pid} to stop its ranks and write "
                  "their figures (kill -KILL it to stop it at once)", file=sys.stderr, flush=True)


def run_tool(argv: list[str]) -> int:
    """Runs a login-node tool with the suite's Python; without the suite's
    environment python3 runs it, unless it needs the environment's packages."""
    need_venv = bool(argv) and argv[0] == "--need-venv"
    if need_venv:
        argv = argv[1:]
    if not argv:
        raise PlanError("run: name a tool (a .py file or -m MODULE)")
    python = suite_python()
    if not python.exists():
        if need_venv:
            raise PlanError(f"the suite's environment is missing ({python} not found): run bash "
                            "aux/setup.sh or set CARAML_VENV to the environment it made")
        python = Path(sys.executable)
    # this checkout's code, whichever environment (CARAML_VENV) runs it
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + path if path else "")
    os.execv(str(python), [str(python), *argv])
    return 1  # not reached: execv replaces this process


def submit_and_say(facts_path: Path) -> int:
    """submit, then the row's lines as the row model decides them now: dry
    run, queued, failed with the refusal, or (a local job) how it ended."""
    from caraml.row import row_out  # the row model: only where a job is submitted

    try:
        return submit(facts_path)
    except (PlanError, OSError, ValueError) as exc:
        report.error(str(exc))
        return 2
    finally:
        sys.stdout.flush()
        # never the step's failure: a line it cannot write is said on stderr
        row_out.main([str(facts_path.resolve().parent)])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        if args[:1] == ["submit"] and len(args) == 2:
            return submit_and_say(Path(args[1]))
        if args[:1] == ["run"]:
            return run_tool(args[1:])
        raise PlanError("usage: jobplan.py submit FACTS | jobplan.py run [--need-venv] TOOL ARGS...")
    except (PlanError, OSError, ValueError) as exc:
        report.error(str(exc))
        return 2


if __name__ == "__main__":
    sys.exit(main())
