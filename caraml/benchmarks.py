"""The suite's benchmarks, one entry each: the one place that names them.
Every reader learns the benchmarks here: the row model (its figures, its
configuration, its unit of work), caraml-compare (units, the job of a time
to solution, reference files), the provenance's contention count (the
drivers), ReFrame's checks, the README's main command and the tests.

A benchmark of a site's own joins without a change to the suite: a Python
file that defines `BENCHMARK = Benchmark(...)`, named in CARAML_BENCHMARKS
(paths, ':' between), is read as one more entry (docs/adding_a_benchmark.md).
A file, not a module name, because the login node's python3, the jobs and
ReFrame each start with their own sys.path, and a path in the environment
reaches them all.

Standard library only: the login node's python3 reads it."""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Paths of registered benchmark files, os.pathsep between
REGISTRY_ENV = "CARAML_BENCHMARKS"
# Graphcore's train.py (GC200) prints its own line, once an epoch
GRAPHCORE_RATE = re.compile(r"throughput: ([0-9.eE+-]+) samples/sec")


def number(value: object) -> float | None:
    try:
        found = float(value)
    except (TypeError, ValueError):
        return None
    return found if found == found else None  # nan: unknown


def whole(value: object) -> int | None:
    found = number(value)
    return None if found is None else int(found)


@dataclass(frozen=True)
class Figures:
    """The names of a benchmark's figures in its driver's summary line
    (`CARAML global:`): the rate (mean and median, per device) and the work
    of the whole loop and of its timed iterations."""

    per_s: str
    per_s_median: str
    per_s_per_device: str
    work_total: str = "samples_total"
    work_timed: str = "samples_timed"


@dataclass(frozen=True)
class ReFrame:
    """A benchmark's ReFrame checks: the JUBE tags of each configuration
    besides the system's, tags that make a configuration one work package,
    and, where it has a data step, the JUBE parameter that holds the step's
    arguments to the suite's Python (the JUBE script's own command)."""

    configurations: tuple[str, ...] = ("smoke",)
    tags: tuple[str, ...] = ()
    prepare: str | None = None


def default_config(g: dict[str, str], params: dict[str, str]) -> dict:
    """A data-parallel benchmark's configuration: the driver's line first,
    the work package's parameters where the line lacks a value."""
    return {"model": g.get("model") or params.get("model") or None,
            "precision": g.get("precision") or params.get("precision") or None,
            "global_batch": whole(g.get("global_batch_size")) or whole(params.get("global_batch_size")),
            "sequence_length": None, "image_size": None, "backend": None,
            "tp": None, "pp": None, "dp": None,
            "micro_batch": whole(g.get("batch_size_per_device"))
            or whole(params.get("batch_size_per_device")),
            "params": None, "compile": None}


@dataclass(frozen=True)
class Benchmark:
    """One benchmark. `name` is the row model's name for it (JUBE's
    row_benchmark, row.json's benchmark) and the key reference files give."""

    name: str
    driver: str  # the module the job runs on every rank
    script: str  # its JUBE script, from the checkout (or absolute)
    outpath: str  # the JUBE script's outpath (run folders), from the checkout
    unit: str  # the unit of work: tokens, images, samples
    figures: Figures
    config: Callable[[dict[str, str], dict[str, str]], dict] = default_config
    # the configuration that stands for a real training's job (model, size;
    # size None: any), for time and energy to solution; None: no such job
    representative: tuple[str, float | None] | None = None
    # the size two rows must share to be like for like: the config's key,
    # its label and the label where the row has none; None: no size (the
    # label is the compile mode)
    size: tuple[str, str, str] | None = None
    # the rows of one model and size differ by backend (megatron, torch)
    variant_by_backend: bool = False
    # caraml-compare's Jobs fields of the job: (epochs, work per epoch);
    # None: tokens per parameter (the LLM)
    job_epochs: tuple[str, str] | None = None
    reframe: ReFrame = field(default_factory=ReFrame)
    # Vendor trainers' own line (Graphcore's), where the driver's line is
    # missing, and the parameter that turns its samples into the unit
    vendor_rate: re.Pattern | None = None
    vendor_sample_param: str | None = None
    # Graphcore's GPT-2 logs one line a step, each step one global batch
    vendor_steps: re.Pattern | None = None
    # the README's main command runs it with the smoke tag on a LOCAL host
    # with GPUs (its full default there takes tens of minutes)
    local_smoke: bool = False
    # its driver reports MFU (model FLOPs over the device's peak)
    mfu: bool = False

    @property
    def per_s_name(self) -> str:
        return f"{self.unit}/s"

    @property
    def per_wh_name(self) -> str:
        return f"{self.unit}/Wh"

    @property
    def markers(self) -> tuple[str, ...]:
        """What a process running this benchmark's driver has in its command line."""
        return (self.driver, self.driver.rsplit(".", 1)[-1] + ".py")


def _llm_config(g: dict[str, str], params: dict[str, str]) -> dict:
    return {"model": g.get("model_size") or params.get("model_size"),
            "precision": g.get("precision") or params.get("precision"),
            "global_batch": whole(g.get("global_batch_size"))
            or whole(params.get("global_batch_used"))
            or whole(params.get("global_batch_size")),
            "sequence_length": whole(g.get("seq_length")) or whole(params.get("seq_length")),
            "image_size": None,
            "backend": g.get("backend") or params.get("backend") or None,
            "tp": whole(g.get("tp")), "pp": whole(g.get("pp")), "dp": whole(g.get("dp")),
            "micro_batch": whole(g.get("micro_batch_size")), "params": number(g.get("params")),
            "compile": None}


def _image_config(g: dict[str, str], params: dict[str, str]) -> dict:
    return {**default_config(g, params), "image_size": whole(params.get("image_size")),
            "backend": "torchvision" if params.get("device_kind") != "ipu" else "poptorch",
            "micro_batch": whole(g.get("batch_size_per_device"))}


def _operator_config(g: dict[str, str], params: dict[str, str]) -> dict:
    # the problem is part of the model's name: two problems are never like for like
    problem = g.get("problem") or params.get("problem")
    return {**default_config(g, params),
            "model": f"{g.get('model') or 'FNO'} {problem}" if problem else None,
            "backend": "neuraloperator",
            "compile": g.get("compile") or params.get("compile_mode") or None}


# in the order the README's main command runs them
BUILT_IN = (
    Benchmark(
        "image", "image_classification.image_classification_torch",
        "image_classification/image_classification_torch_benchmark.xml",
        "image_classification/image_classification_benchmark_run", "images",
        Figures("images_per_s_mean", "images_per_s_median", "images_per_s_per_device"),
        _image_config,
        # ResNet-50 on 224 px images, 90 epochs of ImageNet
        representative=("resnet50", 224.0), job_epochs=("epochs", "images_per_epoch"),
        size=("image_size", "{:g}px", "size n/a"),
        vendor_rate=GRAPHCORE_RATE),
    Benchmark(
        "llm", "llm_training.pretrain_gpt", "llm_training/llm_benchmark_nvidia_amd.yaml",
        "llm_training/llm_benchmark_nvidia_amd_run", "tokens",
        Figures("tokens_per_s", "tokens_per_s_median", "tokens_per_s_per_device",
                "tokens_total", "tokens_timed"),
        _llm_config,
        # the 800M GPT at sequence length 2048, as the CARAML paper ran it
        representative=("800M", 2048.0),
        size=("sequence_length", "seq {:g}", "seq n/a"), variant_by_backend=True,
        reframe=ReFrame(prepare="prepare_args"),
        vendor_rate=GRAPHCORE_RATE, vendor_sample_param="seq_length",
        vendor_steps=re.compile(r"^step \d+ of epoch", re.MULTILINE), local_smoke=True,
        mfu=True),
    Benchmark(
        "operator", "operator_benchmark.fno_training", "operator_benchmark/fno_benchmark.xml",
        "operator_benchmark/operator_benchmark_run", "samples",
        Figures("samples_per_s_mean", "samples_per_s_median", "samples_per_s_per_device"),
        _operator_config,
        # the FNO on upstream's 3D convection problem (5 fields on
        # 64x64x32), the heaviest of its shapes, in any compile mode
        representative=("FNO rbc3d", None),
        job_epochs=("operator_epochs", "operator_samples_per_epoch"),
        # the operator benchmark runs two problems without a problem tag
        reframe=ReFrame(tags=("rbc2d",)),
        vendor_rate=GRAPHCORE_RATE),
)


class UnknownBenchmark(ValueError):
    pass


def _registered(environ=os.environ) -> list[Benchmark]:
    found = []
    for path in filter(None, environ.get(REGISTRY_ENV, "").split(os.pathsep)):
        spec = importlib.util.spec_from_file_location(f"caraml_benchmark_{Path(path).stem}", path)
        if spec is None or not Path(path).is_file():
            raise UnknownBenchmark(f"{REGISTRY_ENV} names {path}, which is no Python file: "
                                   "give the path of a file that defines BENCHMARK")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001 - a site's file: whatever it raises is named
            raise UnknownBenchmark(
                f"{REGISTRY_ENV} names {path}, which fails as it is read ({type(err).__name__}: "
                f"{' '.join(str(err).split())[:200]}): fix the file or take it out of "
                f"{REGISTRY_ENV}") from None
        entry = getattr(module, "BENCHMARK", None)
        if not isinstance(entry, Benchmark):
            raise UnknownBenchmark(f"{path} defines no BENCHMARK = Benchmark(...) "
                                   f"(see docs/adding_a_benchmark.md)")
        found.append(entry)
    return found


def all_benchmarks(environ=os.environ) -> tuple[Benchmark, ...]:
    """The built-in benchmarks, then the registered ones."""
    entries = (*BUILT_IN, *_registered(environ))
    names = [b.name for b in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UnknownBenchmark(f"benchmark {', '.join(twice)} is defined twice: rename the "
                               f"registered one ({REGISTRY_ENV})")
    return entries


def names(environ=os.environ) -> tuple[str, ...]:
    return tuple(b.name for b in all_benchmarks(environ))


def find(name: str | None, environ=os.environ) -> Benchmark | None:
    return next((entry for entry in all_benchmarks(environ) if entry.name == name), None)


def get(name: str | None, environ=os.environ) -> Benchmark:
    entry = find(name, environ)
    if entry is not None:
        return entry
    raise UnknownBenchmark(f"unknown benchmark {name!r}: one of {', '.join(names(environ))}")


def script_path(entry: Benchmark) -> Path:
    return ROOT / entry.script


def main(argv: list[str] | None = None) -> int:
    """`python -m caraml.benchmarks scripts`: each benchmark's JUBE script,
    outpath and whether the main command runs it as a smoke run on a LOCAL
    host with GPUs, one tab-separated line each (aux/run_benchmarks.sh reads them)."""
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["scripts"]:
        print("usage: python -m caraml.benchmarks scripts", file=sys.stderr)
        return 2
    try:
        entries = all_benchmarks()
    except UnknownBenchmark as err:
        print(f"CARAML ERROR: {err}", file=sys.stderr)
        return 2
    for entry in entries:
        print(f"{entry.name}\t{entry.script}\t{entry.outpath}\t{'yes' if entry.local_smoke else 'no'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
