"""The suite's benchmarks, one entry each: the one place that names them
and holds what is their own (caraml/benchmark_entry.py says what an entry
holds). Every reader learns the benchmarks here: the row model (its
figures, its configuration, its unit of work, its data step, its columns of
the full table), caraml-compare (units, the job of a time to solution and
its options, reference files), the provenance's contention count (the
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
from collections.abc import Mapping
from pathlib import Path

from caraml.benchmark_entry import (
    MEMORY_COLUMNS,
    TIMED,
    Benchmark,
    Column,
    DataStep,
    Figures,
    Job,
    JobSetting,
    LossBand,
    ReFrame,
    data_line,
    default_config,
    epochs_job,
    ln_of,
    number,
    whole,
)

ROOT = Path(__file__).resolve().parents[1]
# Paths of registered benchmark files, os.pathsep between
REGISTRY_ENV = "CARAML_BENCHMARKS"
# The JUBE tables' slots for a benchmark's own columns (its entry's columns
# with a source, a value no field of the row holds): the row line's words
# own1, own2, ... in the entry's order (caraml/row/render.py), which
# platform.xml's patterns row_own1 ... read
OWN_SLOTS = 8
# Graphcore's train.py (GC200) prints its own line, once an epoch
GRAPHCORE_RATE = re.compile(r"throughput: ([0-9.eE+-]+) samples/sec")
# Parameters per model size with GPT-2's vocabulary padded as Megatron pads it
# (cpu-small: the local 8192-token BPE of the CPU runs), as the LLM
# benchmark's flops.parameter_count gives them; a row's own parameter count
# wins. caraml imports no benchmark, so the counts are written here and
# tests/compare checks them against that function.
LLM_PARAMETERS = {
    "cpu-small": 5_256_704,
    "117M": 123_689_472,
    "800M": 908_759_040,
    "13B": 12_843_796_480,
    "175B": 174_590_681_088,
}
IMAGENET_TRAIN_IMAGES = 1_281_167
# The operator driver's epoch on synthetic fields (the SYNTHETIC_EPOCH of
# its config.py; tests/compare checks the two agree)
OPERATOR_SAMPLES_PER_EPOCH = 1024


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
            "micro_batch": whole(g.get("micro_batch_size")), "params": whole(g.get("params")),
            "compile": None}


def _llm_data(stdout: str) -> dict[str, str]:
    """The corpus the data step prepared, and its warning of a corpus
    shorter than one sequence (its tokens are repeated)."""
    said = data_line(stdout)
    tiny = re.findall(r"^CARAML warning: corpus \S+ has only (\d+) tokens", stdout, re.MULTILINE)
    if tiny:
        said["name"] = f"{said.get('name', '')} (only {tiny[0]} tokens: repeated)"
    return said


def _llm_work(row: Mapping[str, object], settings: Mapping[str, float | None]) -> tuple[float, str]:
    """A fixed token count, else tokens per parameter of the row's model
    (its own parameter count, else its size's)."""
    tokens = settings["llm_tokens"]
    if tokens is not None:
        return tokens, f"{tokens:.3g} tokens"
    per_parameter = settings["tokens_per_parameter"]
    if per_parameter is None:
        return float("nan"), "n/a: no token count and no tokens per parameter given"
    params, origin = number(row.get("params")), "the row's parameter count"
    if params is None:
        params, origin = LLM_PARAMETERS.get(str(row.get("model"))), f"the {row.get('model')} size's count"
    if params is None:
        return float("nan"), f"n/a: no parameter count for model {row.get('model')}"
    return (per_parameter * params,
            f"{per_parameter:g} tokens per parameter x {params / 1e6:.1f}M parameters ({origin})")


LLM_JOB = Job(
    # the 800M GPT at sequence length 2048, as the CARAML paper ran it
    ("800M", 2048.0), _llm_work,
    (JobSetting("tokens_per_parameter", "--tokens-per-parameter", 20.0,
                "LLM job: tokens per model parameter (default 20: compute-optimal training, "
                "Hoffmann et al. 2022)"),
     JobSetting("llm_tokens", "--llm-tokens", None, "LLM job: a fixed number of tokens instead")),
    any_model="llm_tokens")
# ResNet-50 on 224 px images, 90 epochs of ImageNet
IMAGE_JOB = epochs_job(("resnet50", 224.0), "images",
                       JobSetting("epochs", "--epochs", 90.0, "image job: epochs (default 90)"),
                       JobSetting("images_per_epoch", "--images-per-epoch", IMAGENET_TRAIN_IMAGES,
                                  "image job: images per epoch (default: ImageNet's 1 281 167)"))
# the FNO on upstream's 3D convection problem (5 fields on 64x64x32), the
# heaviest of its shapes, in any compile mode; an FNO's training: hundreds
# of epochs over a data set of about a thousand samples
OPERATOR_JOB = epochs_job(("FNO rbc3d", None), "samples",
                          JobSetting("operator_epochs", "--operator-epochs", 500.0,
                                     "operator job: epochs (default 500)"),
                          JobSetting("operator_samples_per_epoch", "--operator-samples-per-epoch",
                                     OPERATOR_SAMPLES_PER_EPOCH,
                                     "operator job: samples per epoch (default 1024, the driver's "
                                     "synthetic epoch)"))


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


LLM_COLUMNS = (
    Column("ModelSize", "model"), Column("Backend", "backend"), Column("Data", "data", "data.name"),
    Column("TP", "tp"), Column("PP", "pp"), Column("DP", "dp"),
    Column("SequenceLength", "sequence_length"),
    Column("Params", "params"), Column("MicroBatch", "micro_batch"),
    Column("Recompute", "recompute", "global.recompute"),
    Column("Attention", "attention", "global.attention"), Column("Iterations", "timed_iterations"),
    Column("Time/iteration(s)", "time_per_iteration_s", format=".4g"), Column("Tokens/s", "per_s"),
    Column("Tokens/s(median)", "per_s_median", format=".1f"),
    Column("Tokens/s/device", "per_s_per_device"),
    Column("HardwareTFLOP/s/device(with-recompute)", "hardware_tflops_per_device", format=".3f"),
    Column("ModelTFLOP/s/device(MFU-basis)", "model_tflops_per_device", format=".3f"),
    Column("MFU", "mfu"), Column("Peak(TFLOP/s)", "peak_tflops"), Column("PeakSource", "peak_basis"),
    *MEMORY_COLUMNS, Column("Tokens/Wh", "work_per_wh_timed"), Column("RunTokens/Wh", "work_per_wh_run"))
IMAGE_COLUMNS = (
    Column("Model", "model"), Column("ImageSize", "image_size"), Column("Data", "data", "param.data_kind"),
    Column("Images/s", "per_s"), Column("Images/s(median)", "per_s_median", format=".2f"),
    Column("Images/s/device", "per_s_per_device"), *TIMED, *MEMORY_COLUMNS,
    Column("Images/Wh", "work_per_wh_timed"), Column("RunImages/Wh", "work_per_wh_run"))
OPERATOR_COLUMNS = (
    Column("Problem", "problem", "param.problem"), Column("Model", "model"), Column("Compile", "compile"),
    Column("Data", "data", "global.data"), Column("BatchSize/device", "micro_batch"),
    Column("Samples/s", "per_s"), Column("Samples/s(median)", "per_s_median", format=".2f"),
    Column("Samples/s/device", "per_s_per_device"), *TIMED,
    Column("SamplesPerEpoch", "samples_per_epoch", "global.samples_per_epoch"),
    Column("Epoch(s)", "epoch_s", "global.epoch_s", ".4g"),
    Column("CountedFLOP/sample", "flops_counted_per_sample", "global.flops_counted_per_sample", ".4g"),
    Column("CountedTFLOP/s/device", "tflops_counted_per_device", "global.tflops_counted_per_device", ".4g"),
    Column("FLOPNote", "flops_note", "global.flops_note"), *MEMORY_COLUMNS,
    Column("Samples/Wh", "work_per_wh_timed"), Column("RunSamples/Wh", "work_per_wh_run"))

# The loss bands. A classifier that has learnt nothing guesses uniformly:
# its cross-entropy is ln of its classes (the LLM's padded vocabulary, the
# image model's classes); the FNO's MSE against targets of unit variance
# (synthetic: unit normal; generated: scaled by the initial fields' rms) is
# about 1 plus its small initial output's variance. The tolerances hold the
# first losses of the suite's models at their initial weights with room to
# spare (docs/results.md) and still refuse a model whose numbers are garbage.
# An LLM on a prepared corpus (its data step names a prefix) learns the
# commonest tokens within its first iterations, so a measurement's run
# shows its loss fall; a ResNet trained from scratch moves its loss less
# than the noise of a batch in so few iterations, so the image benchmark
# declares no fall.
LLM_LOSS = LossBand(ln_of("vocab_size"), tolerance=0.15,
                    learns=lambda params, data: bool(data.get("prefix")), fall=0.05)
IMAGE_LOSS = LossBand(ln_of("num_classes"), tolerance=0.25)
OPERATOR_LOSS = LossBand(lambda g: 1.0, tolerance=0.5)

# in the order the README's main command runs them
BUILT_IN = (
    Benchmark(
        "image", "image_classification.image_classification_torch",
        "image_classification/image_classification_torch_benchmark.xml",
        "image_classification/image_classification_benchmark_run", "images",
        Figures("images_per_s_mean", "images_per_s_median", "images_per_s_per_device"),
        _image_config, IMAGE_COLUMNS, job=IMAGE_JOB, size=("image_size", "{:g}px", "size n/a"),
        vendor_rate=GRAPHCORE_RATE, loss_band=IMAGE_LOSS),
    Benchmark(
        "llm", "llm_training.pretrain_gpt", "llm_training/llm_benchmark_nvidia_amd.yaml",
        "llm_training/llm_benchmark_nvidia_amd_run", "tokens",
        Figures("tokens_per_s", "tokens_per_s_median", "tokens_per_s_per_device",
                "tokens_total", "tokens_timed"),
        _llm_config, LLM_COLUMNS,
        # the data step's command is the prepare_args parameter of the LLM scripts
        data_step=DataStep(args="prepare_args", describe=_llm_data), job=LLM_JOB,
        size=("sequence_length", "seq {:g}", "seq n/a"), variant_by_backend=True,
        vendor_rate=GRAPHCORE_RATE, vendor_sample_param="seq_length",
        vendor_steps=re.compile(r"^step \d+ of epoch", re.MULTILINE), local_smoke=True,
        mfu=True, loss_band=LLM_LOSS, work_formula="llm_training.flops:recounted"),
    Benchmark(
        "operator", "operator_benchmark.fno_training", "operator_benchmark/fno_benchmark.xml",
        "operator_benchmark/operator_benchmark_run", "samples",
        Figures("samples_per_s_mean", "samples_per_s_median", "samples_per_s_per_device"),
        _operator_config, OPERATOR_COLUMNS, job=OPERATOR_JOB,
        # the operator benchmark runs two problems without a problem tag
        reframe=ReFrame(tags=("rbc2d",)),
        vendor_rate=GRAPHCORE_RATE, loss_band=OPERATOR_LOSS),
)


class UnknownBenchmark(ValueError):
    pass


def _registered(environ: Mapping[str, str] = os.environ) -> list[Benchmark]:
    found = []
    for path in filter(None, environ.get(REGISTRY_ENV, "").split(os.pathsep)):
        spec = importlib.util.spec_from_file_location(f"caraml_benchmark_{Path(path).stem}", path)
        if spec is None or not Path(path).is_file():
            raise UnknownBenchmark(f"{REGISTRY_ENV} names {path}, which is no Python file: "
                                   "give the path of a file that defines BENCHMARK")
        module = importlib.util.module_from_spec(spec)
        try:
            if spec.loader is None:
                raise ImportError("no loader for it")
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


def all_benchmarks(environ: Mapping[str, str] = os.environ) -> tuple[Benchmark, ...]:
    """The built-in benchmarks, then the registered ones."""
    entries = (*BUILT_IN, *_registered(environ))
    names = [b.name for b in entries]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UnknownBenchmark(f"benchmark {', '.join(twice)} is defined twice: rename the "
                               f"registered one ({REGISTRY_ENV})")
    return entries


def names(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    return tuple(b.name for b in all_benchmarks(environ))


def find(name: str | None, environ: Mapping[str, str] = os.environ) -> Benchmark | None:
    return next((entry for entry in all_benchmarks(environ) if entry.name == name), None)


def get(name: str | None, environ: Mapping[str, str] = os.environ) -> Benchmark:
    entry = find(name, environ)
    if entry is not None:
        return entry
    raise UnknownBenchmark(f"unknown benchmark {name!r}: one of {', '.join(names(environ))}")


def script_path(entry: Benchmark) -> Path:
    return ROOT / entry.script


USAGE = "usage: python -m caraml.benchmarks scripts | columns NAME"


def own_column_lines(entry: Benchmark) -> list[str]:
    """A benchmark's own columns (its entry's columns with a source) as
    JUBE's tables read them: each slot's pattern (row_own1, ...; platform.xml),
    its title and its source, one tab-separated line each, or why it has no slot."""
    sourced = [column for column in entry.table_columns if column.source]
    lines = []
    for i, column in enumerate(sourced, 1):
        slot = f"row_own{i}" if i <= OWN_SLOTS else f"none (only the first {OWN_SLOTS} have a slot)"
        lines.append(f"{slot}\t{column.title}\t{column.source}")
    return lines


def main(argv: list[str] | None = None) -> int:
    """`python -m caraml.benchmarks scripts`: each benchmark's JUBE script,
    outpath and whether the main command runs it as a smoke run on a LOCAL
    host with GPUs, one tab-separated line each (aux/run_benchmarks.sh reads them).
    `python -m caraml.benchmarks columns NAME`: the JUBE pattern of each of
    the benchmark's own columns, for its tables (docs/adding_a_benchmark.md)."""
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if argv not in (["scripts"],) and not (len(argv) == 2 and argv[0] == "columns"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        entries = all_benchmarks()
        if argv[0] == "columns":
            print("\n".join(own_column_lines(get(argv[1]))))
            return 0
    except UnknownBenchmark as err:
        print(f"CARAML ERROR: {err}", file=sys.stderr)
        return 2
    for entry in entries:
        print(f"{entry.name}\t{entry.script}\t{entry.outpath}\t{'yes' if entry.local_smoke else 'no'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
