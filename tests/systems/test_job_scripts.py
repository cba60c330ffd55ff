"""The job scripts JUBE writes for every system, the model sizes and every
benchmark (dry runs, see conftest.py), checked line by line against the paper's
facts: resources, launcher, container, network and PMIx settings, the
parallel layout, and the bad combinations that must fail before submission."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from llm_training.arguments import parse, resolve_layout
from tests.jube_runs import JubeRun
from tests.systems.conftest import (
    ACCOUNT,
    EXTRA_BIND,
    IC_SCRIPT,
    IC_SWEPT,
    IPU_SCRIPT,
    LLM_COMBOS,
    LLM_SCRIPT,
    SIZES,
    SYSTEMS,
    ic_tags,
    llm_outcome,
)


def check_resources(pkg, system: str, nodes: int) -> None:
    e = SYSTEMS[system]
    sb = pkg.sbatch()
    assert sb["nodes"] == str(nodes)
    assert sb["ntasks-per-node"] == str(e.tasks)
    assert sb["cpus-per-task"] == str(e.cpus)
    assert sb.get("partition") == e.partition
    assert sb.get("gres") == e.gres
    assert sb.get("gpus-per-task") == e.gpus_per_task
    assert sb.get("constraint") == e.constraint
    assert sb["account"] == ACCOUNT
    assert sb["signal"] == "B:USR1@120"


def check_environment(pkg, system: str) -> None:
    e = SYSTEMS[system]
    job = pkg.job
    assert 'head -n 1)$MASTER_ADDR_SUFFIX"\n' in job
    assert f"\nMASTER_ADDR_SUFFIX={e.master_suffix or chr(39) * 2}\n" in job
    assert 'export SRUN_CPUS_PER_TASK="$SLURM_CPUS_PER_TASK"' in job
    assert ("NCCL_SOCKET_IFNAME=ib0 GLOO_SOCKET_IFNAME=ib0" in job) == e.infiniband_env
    assert ("MIOPEN_USER_DB_PATH=/tmp/caraml-miopen-${SLURM_JOB_ID:-0}" in job) == (e.kind == "rocm")
    # no default row asks for tf32: ROCm's TF32 switch stays off (the sweep's tf32 rows set it)
    assert "HIPBLASLT_ALLOW_TF32" not in job
    visible = ",".join(str(i) for i in range(e.devices))
    if e.kind == "cuda" and not e.gpus_per_task:
        assert f"\nexport CUDA_VISIBLE_DEVICES={visible}\n" in job
    elif e.kind == "rocm":
        assert f"\nexport HIP_VISIBLE_DEVICES={visible}\n" in job
    else:  # Slurm binds one GPU to each task, or there are no GPUs
        assert "VISIBLE_DEVICES" not in job
    threads = e.cpus // (1 if e.launcher in ("srun", "jpwr") else e.devices // e.tasks)
    assert f"\nexport OMP_NUM_THREADS={threads}\n" in job


def check_launch(pkg, system: str, nodes: int, root, rundir) -> list[str]:
    """Checks srun, the container and the launcher; returns the driver's part."""
    e = SYSTEMS[system]
    argv = pkg.launch()
    srun_end = argv.index("apptainer")
    srun = argv[:srun_end]
    assert srun[:2] == ["srun", "--kill-on-bad-exit=1"]
    assert (f"--mpi={e.mpi}" in srun) == bool(e.mpi)
    assert (srun[-2:] == ["env", "PMIX_SECURITY_MODE=native"]) == e.pmix_native
    image_at = argv.index(str(root / "containers" / e.image))
    container = argv[srun_end:image_at]
    assert container[:2] == ["apptainer", "exec"]
    assert (e.container_flag in container) if e.container_flag else \
        not {"--nv", "--rocm"} & set(container)
    binds = [container[i + 1] for i, word in enumerate(container) if word == "--bind"]
    assert binds == [str(root), str(rundir), EXTRA_BIND]
    envs = [container[i + 1] for i, word in enumerate(container) if word == "--env"]
    assert f"PYTHONPATH={root}" in envs
    rest = argv[image_at + 1:]
    if e.launcher in ("torchrun_jsc", "torchrun"):
        module = "torchrun_jsc" if e.launcher == "torchrun_jsc" else "torch.distributed.run"
        # torchrun ignores Slurm's time-limit warning; its workers stop on it (aux/job.sh.in)
        assert rest[:2] == ["env", "--ignore-signal=USR1"]
        rest = rest[2:]
        assert rest[:3] == ["python3", "-m", module]
        assert f"--nnodes={nodes}" in rest and f"--nproc-per-node={e.devices}" in rest
        assert "--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT" in rest
        return rest[rest.index("-m", 3):]
    if e.launcher == "srun":  # one task per GPU: the task is the rank
        assert rest[0] == "python3"
        return rest[1:]
    assert e.launcher == "jpwr"
    assert rest[:10] == ["/opt/caraml/venv/bin/python", "-m", "jpwr", "--methods", e.energy,
                         "--df-out", "energy", "--df-suffix", "_rank%q{SLURM_PROCID}", "--"]
    assert rest[10] == "python3"
    return rest[11:]


def rundir_of(pkg):
    return pkg.work.parents[1]


@pytest.mark.parametrize("system", list(SYSTEMS))
def test_image_classification_job_scripts(dryruns, root, system):
    packages = dryruns[(IC_SCRIPT, ic_tags(system))]
    assert len(packages) == (7 if system in IC_SWEPT else 1)  # global batch sizes 32 to 2048, or smoke's
    for pkg in packages:
        assert "CARAML dryrun:" in pkg.stderr and "CARAML ERROR" not in pkg.stderr
        check_resources(pkg, system, nodes=1)
        check_environment(pkg, system)
        driver = check_launch(pkg, system, 1, root, rundir_of(pkg))
        if system == "GC200":
            assert driver[0] == "/opt/graphcore-examples/vision/cnns/pytorch/train/train.py"
            assert driver[driver.index("--replicas") + 1] == "4"
        else:
            assert driver[:2] == ["-m", "image_classification.image_classification_torch"]
            methods = driver[driver.index("--energy-methods") + 1:]
            methods = methods[:next((i for i, a in enumerate(methods) if a.startswith("--")),
                                    len(methods))]
            assert methods == SYSTEMS[system].energy.split()
            # a GPU system names its device, so a torch that sees none fails the row
            assert driver[driver.index("--device") + 1] == \
                ("cuda" if SYSTEMS[system].kind in ("cuda", "rocm") else "cpu")
        subprocess.run(["bash", "-n", str(pkg.work / "job.sh")], check=True)


def test_gc200_image_classification_fits_the_ipu_memory(dryruns):
    """Micro-batches of at most 16 images, the rest by gradient accumulation,
    four replicas: every global batch of the sweep is kept exactly."""
    batches = []
    for pkg in dryruns[(IC_SCRIPT, ("GC200",))]:
        argv = pkg.launch()
        micro, accumulation, replicas = (int(argv[argv.index(flag) + 1]) for flag in
                                         ("--batch-size", "--gradient-accumulation", "--replicas"))
        assert micro <= 16 and replicas == 4
        batches.append(micro * accumulation * replicas)
    assert sorted(batches) == [32 * 2 ** i for i in range(7)]


@pytest.mark.parametrize("size,system", LLM_COMBOS)
def test_llm_job_scripts(dryruns, root, size, system):
    [pkg] = dryruns[(LLM_SCRIPT, (size, system))]
    nodes, tp, pp = SIZES[size]
    outcome = llm_outcome(system, size)
    if outcome != "ok":
        reason = {"kind": "use llm_training/llm_benchmark_ipu.yaml",
                  "layout": f"{tp} x {pp} = {tp * pp} does not divide",
                  "nodes": f"{system} has {SYSTEMS[system].nodes_available} node"}[outcome]
        assert reason in pkg.stderr, pkg.stderr
        # the planner writes no job script for a job that must not be submitted
        assert "CARAML dryrun:" not in pkg.stderr and not (pkg.work / "job.sh").exists()
        return
    check_resources(pkg, system, nodes=nodes)
    assert "CARAML dryrun:" in pkg.stderr and "CARAML ERROR" not in pkg.stderr
    check_environment(pkg, system)
    driver = check_launch(pkg, system, nodes, root, rundir_of(pkg))
    assert driver[:3] == ["-m", "llm_training.pretrain_gpt", "@prepare_data/data.args"]
    assert driver[driver.index("--model-size") + 1] == size
    assert driver[driver.index("--backend") + 1] == "megatron"
    e = SYSTEMS[system]
    peak = driver[driver.index("--peak-tflops") + 1] if "--peak-tflops" in driver else None
    assert peak == e.peak_tflops
    # The layout the preflight printed, and the driver's own rules applied
    # to the job's command line and devices, agree with the paper's.
    devices = nodes * e.devices
    layout = pkg.layout()
    assert (int(layout["tp"]), int(layout["pp"]), int(layout["dp"])) == (tp, pp, devices // (tp * pp))
    args = [a for a in driver[2:] if not a.startswith("@")]
    resolved = resolve_layout(parse([*args, "--synthetic"]), world_size=devices)
    assert (resolved.tensor_parallel, resolved.pipeline_parallel, resolved.data_parallel) \
        == (tp, pp, devices // (tp * pp))
    assert resolved.global_batch_size == int(layout["global_batch"])
    subprocess.run(["bash", "-n", str(pkg.work / "job.sh")], check=True)


def test_800m_on_a100_is_the_documented_layout(dryruns, root):
    """The issue's example, spelled out."""
    [pkg] = dryruns[(LLM_SCRIPT, ("800M", "A100"))]
    sb = pkg.sbatch()
    assert (sb["gres"], sb["partition"], sb["nodes"]) == ("gpu:4", "dc-gpu", "1")
    line = " ".join(pkg.launch())
    assert f"apptainer exec --nv --bind {root} " in line
    assert "-m torchrun_jsc --nnodes=1 --nproc-per-node=4 --log-dir=torchrun_logs " in line
    assert pkg.layout() | {"system": "A100"} == {
        "system": "A100", "nodes": "1", "devices": "4", "tp": "1", "pp": "1", "dp": "4",
        "micro_batch": "4", "global_batch": "512", "microbatches": "32"}


SWEEP = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096]  # Figure 2 of the paper


def test_sweep_sweeps_the_default_size(dryruns):
    packages = dryruns[(LLM_SCRIPT, ("A100", "sweep"))]
    assert sorted(int(pkg.layout()["global_batch"]) for pkg in packages) == SWEEP
    assert all("--model-size 800M " in " ".join(pkg.launch()) for pkg in packages)


def test_sweep_sweeps_any_size(dryruns):
    packages = dryruns[(LLM_SCRIPT, ("117M", "A100", "sweep"))]
    assert len(packages) == len(SWEEP)
    assert all("--model-size 117M " in " ".join(pkg.launch()) for pkg in packages
               if "CARAML layout:" in pkg.stdout)
    # 117M's micro-batch of 8 on 4 devices takes 32 samples at least
    smallest = [pkg for pkg in packages if "--global-batch-size 16 " in pkg.facts]
    assert len(smallest) == 1 and "not divisible by micro-batch size 8" in smallest[0].stderr


def test_13b_on_jedi_is_the_upstream_layout(dryruns):
    [pkg] = dryruns[(LLM_SCRIPT, ("13B", "JEDI"))]
    layout = pkg.layout()
    assert (layout["nodes"], layout["tp"], layout["pp"], layout["dp"]) == ("44", "2", "2", "44")
    sb = pkg.sbatch()
    # GPU-centric affinity: one task per superchip with its 72 cores and its GPU
    assert (sb["ntasks-per-node"], sb["cpus-per-task"], sb["gpus-per-task"]) == ("4", "72", "1")
    assert "torchrun" not in " ".join(pkg.launch())


def test_cpu_route_is_local_and_containerless(dryruns, root):
    for pkg in dryruns[(IC_SCRIPT, ("CPU",))] + dryruns[(LLM_SCRIPT, ("CPU",))]:
        argv = pkg.launch()
        assert argv[:2] == [str(root / ".venv/bin/python"), "-m"]
        assert "srun" not in argv and "apptainer" not in argv
        assert "--standalone" in argv and "--nproc-per-node=1" in argv
        assert "VISIBLE_DEVICES" not in pkg.job
        assert "CARAML dryrun:" in pkg.stderr


def test_two_jobs_outside_slurm_meet_on_ports_of_their_own(dryruns, tmp_path):
    """The job script's rendezvous lines, run as a job outside Slurm runs
    them while another such job holds its port."""
    [pkg] = dryruns[(IC_SCRIPT, ("CPU",))][:1]
    job = pkg.job
    start = job.index('if [ -n "${SLURM_JOB_NODELIST:-}" ]; then')
    end = job.index("export MASTER_ADDR MASTER_PORT", start)
    script = tmp_path / "rendezvous.sh"
    script.write_text(job[start:end] + 'export MASTER_ADDR MASTER_PORT\necho "$MASTER_ADDR:$MASTER_PORT"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}

    def endpoint():
        out = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=True)
        host, port = out.stdout.strip().split(":")
        return host, int(port)

    host, first = endpoint()
    with socket.socket() as held:
        held.bind((host, first))
        held.listen()
        assert host == "127.0.0.1" and endpoint()[1] != first


@pytest.mark.parametrize("tags,data", [(("synthetic",), ["--dataset", "generated"]),
                                       ((), ["--dataset", "mmap", "--input-files"])])
def test_ipu_llm_job_scripts(dryruns, root, tags, data):
    packages = dryruns[(IPU_SCRIPT, tags)]
    batches = []
    for pkg in packages:
        assert "CARAML dryrun:" in pkg.stderr and "CARAML ERROR" not in pkg.stderr
        check_resources(pkg, "GC200", nodes=1)
        check_environment(pkg, "GC200")
        driver = check_launch(pkg, "GC200", 1, root, rundir_of(pkg))
        assert driver[0] == "/opt/graphcore-examples/nlp/gpt2/pytorch/train_gpt2.py"
        start = driver.index("--dataset")
        assert driver[start:start + len(data)] == data

        def value(flag, count=1):
            i = driver.index(flag)
            return driver[i + 1:i + 1 + count]
        # 117M pipelined over 4 IPUs: the embedding alone on the first
        assert value("--model") == ["gpt2"] and value("--max-len") == ["1024"]
        assert value("--ipus-per-replica") == ["4"] and value("--replication-factor") == ["1"]
        assert value("--layers-per-ipu", 4) == ["0", "4", "4", "4"]
        batches.append(int(value("--batch-size")[0]) * int(value("--gradient-accumulation")[0])
                       * int(value("--device-iterations")[0]))
        subprocess.run(["bash", "-n", str(pkg.work / "job.sh")], check=True)
    assert sorted(batches) == [64 * 2 ** i for i in range(9)]  # 64 to 16384


def test_job_scripts_are_unique_per_work_package(dryruns):
    """Each sweep point gets its own command (no two work packages alike)."""
    for key, packages in dryruns.items():
        launches = [" ".join(pkg.launch()) for pkg in packages if (pkg.work / "job.sh").exists()]
        assert len(set(launches)) == len(launches), key


def test_a_cpu_smoke_run_measures_its_matmul_rate_in_a_fifth_of_the_time(dryruns, tmp_path):
    full = dryruns[(LLM_SCRIPT, ("CPU",))]
    assert full and all("--peak-tflops measure --device cpu" in pkg.job for pkg in full)
    run = JubeRun(LLM_SCRIPT, tmp_path / "run")
    run.run("CPU", "smoke", "synthetic", "dryrun")
    [work] = run.work_dirs("execute")
    assert "--peak-tflops measure --peak-seconds 0.3 --device cpu" in (work / "job.sh").read_text()


def test_a_dry_run_ends_finished(tmp_path):
    """The execute step waits for the job's done file; a dry run submits no
    job, so the planner ends the step itself and the run is not left RUNNING."""
    run = JubeRun(IC_SCRIPT, tmp_path / "run")
    run.run("CPU", "smoke", "dryrun")
    assert run.status() == "FINISHED"
    [work] = run.work_dirs("execute")
    assert (work / "job.sh").exists() and not (work / "job.out").exists()
