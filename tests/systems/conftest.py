"""Every system of the paper, expanded into job scripts by the real JUBE
with the `dryrun` tag (nothing is submitted, no image needs to exist), once
per session: one `jube run` per system, benchmark and model size, two at a
time. The facts the job scripts are checked against are written here from
the CARAML paper (Table I, section V), the upstream configuration and the
sites' and vendors' pages (JUPITER, GB200, MILA: docs/systems.md), not read
from platform.xml, so a wrong value there fails a test."""

from __future__ import annotations

import itertools
import os
import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.jube_runs import ROOT, JubeRun

IC_SCRIPT = "image_classification/image_classification_torch_benchmark.xml"
LLM_SCRIPT = "llm_training/llm_benchmark_nvidia_amd.yaml"
IPU_SCRIPT = "llm_training/llm_benchmark_ipu.yaml"
OP_SCRIPT = "operator_benchmark/fno_benchmark.xml"
ACCOUNT = "caraml-test-project"
EXTRA_BIND = "/data/caraml-test-images"


@dataclass(frozen=True)
class Expect:
    """What a system's job script must say."""

    partition: str | None
    devices: int
    tasks: int
    cpus: int
    gres: str | None
    launcher: str  # torchrun_jsc | torchrun | srun | jpwr
    image: str
    container_flag: str | None
    master_suffix: str
    infiniband_env: bool  # NCCL/Gloo on ib0
    pmix_native: bool
    mpi: str | None
    nodes_available: int
    kind: str
    energy: str
    peak_tflops: str  # the device in caraml/device_peaks.py
    tdp_w: float | None
    gpus_per_task: str | None = None
    constraint: str | None = None


SYSTEMS = {
    "A100": Expect("dc-gpu", 4, 1, 128, "gpu:4", "torchrun_jsc", "caraml_nvidia_x86.sif", "--nv",
                   "i", True, True, "pspmix", 192, "cuda", "pynvml", "A100", 400),
    "H100": Expect("dc-h100", 4, 1, 72, "gpu:4", "torchrun_jsc", "caraml_nvidia_x86.sif", "--nv",
                   "i", True, True, "pspmix", 1, "cuda", "pynvml", "H100-PCIe", 350),
    "WAIH100": Expect("dc-hwai", 4, 1, 64, "gpu:4", "torchrun_jsc", "caraml_nvidia_x86.sif", "--nv",
                      "i", True, True, "pspmix", 16, "cuda", "pynvml", "H100-SXM", 700),
    # Mila's cn-g nodes (Mila's node profile table): gres a100l is the 80 GB A100,
    # the nvlink feature picks the SXM4 nodes; plain torchrun, no JSC settings
    "MILA": Expect("long", 4, 1, 64, "gpu:a100l:4", "torchrun", "caraml_nvidia_x86.sif", "--nv",
                   "", False, False, None, 29, "cuda", "pynvml", "A100", 400, constraint="nvlink"),
    "GH200": Expect("dc-gh", 1, 1, 72, "gpu:1", "torchrun_jsc", "caraml_nvidia_arm64.sif", "--nv",
                    "", False, True, "pspmix", 1, "cuda", "pynvml gh", "GH200", 700),
    "JEDI": Expect("all", 4, 4, 72, "gpu:4", "srun", "caraml_nvidia_arm64.sif", "--nv",
                   "", True, False, "pmi2", 44, "cuda", "pynvml gh", "GH200", 680, gpus_per_task="1"),
    # JSC's JUPITER configuration page: ~6000 booster nodes of 4x GH200, 680 W a superchip
    "JUPITER": Expect("booster", 4, 4, 72, "gpu:4", "srun", "caraml_nvidia_arm64.sif", "--nv",
                      "", True, False, "pmi2", 6000, "cuda", "pynvml gh", "GH200", 680,
                      gpus_per_task="1"),
    # 4x B200 and 2x 72-core Grace a node, 400 nodes (upstream CARAML's operator
    # benchmark); one task per GPU; NVML measures the GPUs only
    "GB200": Expect(None, 4, 4, 36, "gpu:4", "srun", "caraml_nvidia_arm64.sif", "--nv",
                    "", False, False, "pmi2", 400, "cuda", "pynvml", "GB200", 1200,
                    gpus_per_task="1"),
    # a device is one GCD: the paper's 362.1 TFLOP/s and 560 W are per module of two
    "MI250": Expect("dc-mi200", 8, 1, 48, None, "torchrun_jsc", "caraml_rocm.sif", "--rocm",
                    "i", False, True, "pspmix", 2, "rocm", "rocm", "MI250-GCD", 560 / 2),
    "MI300X": Expect(None, 8, 1, 48, None, "torchrun", "caraml_rocm.sif", "--rocm",
                     "", False, False, None, 1, "rocm", "rocm", "MI300X", 750, constraint="mi300x"),
    "MI300A": Expect(None, 4, 1, 48, None, "torchrun", "caraml_rocm.sif", "--rocm",
                     "", False, False, None, 1, "rocm", "rocm", "MI300A", 550, constraint="mi300a"),
    "GC200": Expect("dc-ipu", 4, 1, 48, None, "jpwr", "caraml_ipu.sif", None,
                    "", False, True, "pspmix", 1, "ipu", "gc", "GC200", 300),
}

# The two-node CPU systems of the test cluster (tests/slurm_cluster.py),
# checked by running them: tests/e2e/test_e2e_multinode.py
MULTINODE_TEST_SYSTEMS = ["CPU2N", "CPU2NT"]

# Model sizes of the LLM benchmark: nodes of the upstream configuration, and
# tensor x pipeline parallel size (paper, section III-A1).
SIZES = {"117M": (1, 1, 1), "800M": (1, 1, 1), "13B": (44, 2, 2), "175B": (16, 8, 8)}


def llm_outcome(system: str, size: str) -> str:
    """"ok", or the reason the combination must fail before submission: the
    common checks (device kind, nodes) come before the benchmark's layout."""
    e = SYSTEMS[system]
    nodes, tp, pp = SIZES[size]
    if e.kind == "ipu":
        return "kind"
    if nodes > e.nodes_available:
        return "nodes"
    if (nodes * e.devices) % (tp * pp):
        return "layout"
    return "ok"


@dataclass
class Package:
    """One work package of a dry run: its job script and what the step printed."""

    work: Path

    @property
    def job(self) -> str:
        return (self.work / "job.sh").read_text()

    @property
    def facts(self) -> str:
        """What JUBE handed the planner (job.facts), written whether or not the checks pass."""
        return (self.work / "job.facts").read_text()

    @property
    def stdout(self) -> str:
        return (self.work / "stdout").read_text()

    @property
    def stderr(self) -> str:
        return (self.work / "stderr").read_text()

    def sbatch(self) -> dict[str, str]:
        return dict(re.findall(r"^#SBATCH --([\w-]+)=(.*)$", self.job, re.MULTILINE))

    def launch(self) -> list[str]:
        """The launch line (the one the job script sends to the background)."""
        # not the watcher that local runs start (a continuation line of options), nor the power guard
        lines = [ln for ln in self.job.splitlines()
                 if ln.rstrip().endswith(" &") and not ln.lstrip().startswith("--")
                 and "caraml.job.power_guard" not in ln]
        assert len(lines) == 1, lines
        return shlex.split(lines[0].rstrip()[:-1])

    def layout(self) -> dict[str, str]:
        line = re.search(r"^CARAML layout: (.*)$", self.stdout, re.MULTILINE)
        assert line, self.stdout + self.stderr
        return dict(kv.split("=") for kv in line.group(1).split())


def _llm_combos() -> list[tuple[str, str]]:
    """(size, system) of the LLM's dry runs: every system at 800M, 13B and
    175B wherever they fit, one refused for its nodes (which system has how
    many nodes: test_platform_and_preflight.py) and 117M once (its job
    differs from 800M's only in --model-size)."""
    combos = [("800M", system) for system in SYSTEMS]
    combos += [(size, system) for size in ("13B", "175B") for system in SYSTEMS
               if llm_outcome(system, size) == "ok"]
    return combos + [("13B", "H100"), ("117M", "A100")]


LLM_COMBOS = _llm_combos()


# The systems whose image dry run plans the whole batch sweep (seven work
# packages: A100 for the sweep, GC200 for its micro-batches); every other
# system's plans one smoke job: its resources, environment and launch are
# the same for every batch, and checking them once each takes the dry runs
# 66 work packages fewer.
IC_SWEPT = ("A100", "GC200")


def ic_tags(system: str) -> tuple[str, ...]:
    """The tags of the image benchmark's dry run of a system."""
    return (system,) if system in ("CPU", *IC_SWEPT) else (system, "smoke")


def _combos() -> list[tuple[str, tuple[str, ...]]]:
    combos = [(IC_SCRIPT, ic_tags(system)) for system in ["CPU", *SYSTEMS]]
    combos += [(LLM_SCRIPT, combo) for combo in LLM_COMBOS]
    combos += [(LLM_SCRIPT, ("CPU",)), (IPU_SCRIPT, ("synthetic",)), (IPU_SCRIPT, ())]
    combos += [(OP_SCRIPT, (system,)) for system in ["CPU", *SYSTEMS]]
    combos += [(OP_SCRIPT, ("JEDI", "pic3d", "navier_stokes2d", "compile")),
               (OP_SCRIPT, ("A100", "rbc3d", "precision")),
               (OP_SCRIPT, ("MI300X", "rbc3d", "precision"))]
    # the sweep with the default size and with another one
    combos += [(LLM_SCRIPT, ("A100", "sweep")), (LLM_SCRIPT, ("117M", "A100", "sweep"))]
    return combos


@pytest.fixture(scope="session")
def dryruns(tmp_path_factory) -> dict[tuple[str, tuple[str, ...]], list[Package]]:
    """(script, tags) -> the work packages of its submitting step."""
    base = tmp_path_factory.mktemp("dryruns")
    env = {**os.environ, "CARAML_ACCOUNT": ACCOUNT, "CARAML_CONTAINER_BINDS": EXTRA_BIND}

    # JUBE parses in a script's folder, so runs of one folder go one at a
    # time (JubeRun.run holds its lock) and the order alternates between
    # the folders so that two runs can still go side by side.
    combos = _combos()

    def expand(index_combo):
        index, (script, tags) = index_combo
        run = JubeRun(script, base / f"run{index}", env=env)
        run.run(*tags, "dryrun")
        step = "build_container" if "container" in tags else "execute"
        return [Package(work) for work in run.work_dirs(step)]

    folders = list(dict.fromkeys(Path(script).parent for script, _ in combos))
    by_folder = [[c for c in enumerate(combos) if Path(c[1][0]).parent == folder] for folder in folders]
    alternating = [c for group in itertools.zip_longest(*by_folder) for c in group if c]
    with ThreadPoolExecutor(max_workers=2) as pool:
        packages = dict(zip((c for _, c in alternating), pool.map(expand, alternating)))
    return packages


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
