"""The LLM benchmark against plain loops and Hugging Face, in two ways:

- as it runs: the LLM driver with the torch backend started as JUBE starts
  it (the data step's local corpus through its DataLoader, its loop,
  timing and stop condition, jpwr measuring) by turns with a plain loop in
  a process of its own over the same network (the torch backend's GPT),
  optimizer (its AdamW, clipping and loss scaling) and batches (the same
  micro-batches, read into memory first) (aux/perf/as_run.py);
- the step alone: the backends' training step side by side with Hugging
  Face transformers' GPT-2 at the same shape, precision, batch and
  optimizer, in one process on one device, interleaved round by round (the
  megatron backend where there is a GPU).

Defaults that fit the host: the 800M GPT in bf16 on a GPU, cpu-small in
fp32 (the CPU system's configuration) on a CPU.

    .venv/bin/python aux/perf/llm_peers.py [--model-size M] [--precision P]
        [--global-batch-size B] [--micro-batch-size m] [--rounds 5] [--as-run-rounds 8]
        [--as-run-iterations 160] [--as-run-slice S]
        [--models megatron torch torch-compiled hf hf-compiled] [--out docs/perf]

Writes one JSON file per run into --out (machine, device, driver, versions,
every round's times, tokens/s, model TFLOP/s, MFU against the datasheet
peak, the ratios) and prints markdown tables for docs/results.md. A
benchmark, not a test: it judges nothing."""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import as_run  # noqa: E402
import peer_record  # noqa: E402
import torch  # noqa: E402
from hf_gpt2 import HuggingFaceGPT2  # noqa: E402

from caraml import device_peaks  # noqa: E402
from caraml.node import dist as caraml_dist  # noqa: E402
from caraml.node import precision as caraml_precision  # noqa: E402
from llm_training import arguments  # noqa: E402
from llm_training.batches import micro_batches  # noqa: E402
from llm_training.flops import iteration_flops  # noqa: E402
from llm_training.gpt_torch import GPT  # noqa: E402
from llm_training.pretrain_gpt import set_up  # noqa: E402
from llm_training.torch_backend import adam_settings, clipped_step, param_groups  # noqa: E402

MODELS = ("megatron", "torch", "torch-compiled", "hf", "hf-compiled")
REFERENCE = "hf-compiled"


def build(name: str, args_for, dist):
    """One model of the comparison and the arguments it was built with."""
    backend = "megatron" if name == "megatron" else "torch"
    args = args_for(backend, name == "torch-compiled")
    layout = arguments.resolve_layout(args, world_size=1)
    gpt = arguments.gpt_config(args, args.vocab_size)
    if name.startswith("hf"):
        return HuggingFaceGPT2(args, gpt, layout.microbatches, dist.device,
                               compile=name == "hf-compiled"), args, layout, gpt
    if name == "megatron":
        from llm_training.megatron_backend import MegatronBackend

        return MegatronBackend(gpt, args, layout, dist), args, layout, gpt
    from llm_training.torch_backend import TorchBackend

    return TorchBackend(gpt, args, layout, dist), args, layout, gpt


GPU_DEFAULTS = {"model_size": "800M", "precision": "bf16", "global_batch_size": 32,
                "micro_batch_size": 8}
CPU_DEFAULTS = {"model_size": "cpu-small", "precision": "fp32", "global_batch_size": 4,
                "micro_batch_size": 2}
# the data step of the JUBE script on a CPU or LOCAL system: this host's own corpus
DATA_ENV = {"CARAML_DEFAULT_CORPUS": "local",
            "CARAML_DATA_DIR": str(ROOT / "llm_training" / "llm_data")}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-size")
    p.add_argument("--precision")
    p.add_argument("--global-batch-size", type=int)
    p.add_argument("--micro-batch-size", type=int)
    p.add_argument("--recompute-activations", default="none")
    # a cpu-small iteration on a CPU takes about 0.5 s: a turn of 8 s spans
    # about 16, and 160 of them about 10 turns
    as_run.add_arguments(p, warmup=3, iterations=160, slice_s=8.0)
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--out", type=Path, default=peer_record.OUT)
    p.add_argument("--data-args", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args()
    for key, value in (GPU_DEFAULTS if torch.cuda.is_available() else CPU_DEFAULTS).items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    return a


def driver_flags(a: argparse.Namespace, device: str) -> list[str]:
    """The flags the as-run driver and the plain loop share"""
    return ["--backend", "torch", "--model-size", a.model_size, "--precision", a.precision,
            "--global-batch-size", str(a.global_batch_size),
            "--micro-batch-size", str(a.micro_batch_size),
            "--recompute-activations", a.recompute_activations,
            "--train-iters", str(a.warmup + a.as_run_iterations), "--device", device]


def plain_process(a: argparse.Namespace) -> int:
    """--plain: a plain loop over the torch backend's GPT on the driver's own
    first micro-batches, held in memory; timed for aux/perf/as_run.py"""
    dist = caraml_dist.init("auto")
    args = arguments.parse([f"@{a.data_args}", *driver_flags(a, dist.device.type),
                            "--energy-methods", "none"])
    setup = set_up(args, dist)
    args, layout = setup.args, setup.layout
    loader = micro_batches(setup.train_data, micro_batch_size=layout.micro_batch_size,
                           data_parallel=1, data_parallel_rank=0, num_workers=0,
                           device=dist.device)
    held = [next(loader) for _ in range(layout.microbatches * (a.warmup + a.as_run_iterations))]
    batches = itertools.cycle(held)
    torch.manual_seed(args.seed)
    model = GPT(setup.gpt, args.recompute).to(dist.device)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(param_groups(model, args.weight_decay), **adam_settings(args))
    autocast = caraml_precision.autocast(args.precision, dist.device)
    scaler = caraml_precision.grad_scaler(args.precision, dist.device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        for _ in range(layout.microbatches):
            batch = next(batches)
            with autocast:
                loss = model(batch["tokens"], batch["labels"], batch["loss_mask"])
            scaler.scale(loss / layout.microbatches).backward()
        clipped_step(scaler, optimizer, params, args.clip_grad)

    as_run.time_plain(step, a.warmup, a.as_run_iterations, dist.sync)
    dist.close()
    return 0


def prepared_data(work: Path, model_size: str, env: dict[str, str]) -> Path:
    """The data step of the JUBE script on this host: the driver's data
    arguments, in a file under `work`"""
    data_args = work / "data.args"
    prepared = as_run.checked(
        [sys.executable, "-m", "llm_training.data.prepare", "--driver-args-file",
         str(data_args), "--model-size", model_size], env, "the data step")
    print(prepared.strip().splitlines()[-1] if prepared.strip() else "# data prepared")
    return data_args


def as_run_comparison(a: argparse.Namespace, device: str) -> dict:
    env = dict(os.environ) | DATA_ENV
    with tempfile.TemporaryDirectory() as work:
        data_args = prepared_data(Path(work), a.model_size, env)
        driver_args = ["-m", "llm_training.pretrain_gpt", f"@{data_args}", *driver_flags(a, device),
                       "--warmup-iters", str(a.warmup), "--log-interval", "5",
                       "--energy-dir", str(Path(work) / "energy"), "--energy-methods", "auto"]
        plain_args = ["--model-size", a.model_size, "--precision", a.precision,
                      "--global-batch-size", str(a.global_batch_size),
                      "--micro-batch-size", str(a.micro_batch_size),
                      "--recompute-activations", a.recompute_activations,
                      "--warmup", str(a.warmup), "--as-run-iterations", str(a.as_run_iterations),
                      "--data-args", str(data_args)]
        return as_run.compare(a, device, driver_args, Path(__file__), plain_args, env)


def main() -> int:
    a = parse()
    warnings.filterwarnings("ignore")
    if a.plain:
        return plain_process(a)
    as_run_figures = (as_run_comparison(a, "cuda" if torch.cuda.is_available() else "cpu")
                      if a.as_run_rounds else None)
    dist = caraml_dist.init("auto")
    models = [m for m in a.models if m != "megatron" or dist.device.type == "cuda"]

    def args_for(backend: str, compile: bool) -> arguments.Args:
        return arguments.parse([
            "--model-size", a.model_size, "--backend", backend, "--synthetic",
            "--precision", a.precision, "--global-batch-size", str(a.global_batch_size),
            "--micro-batch-size", str(a.micro_batch_size), "--no-sequence-parallel",
            "--no-use-distributed-optimizer", "--recompute-activations", a.recompute_activations,
            "--train-iters", "2", "--energy-methods", "none", "--device", dist.device.type,
            *(["--compile"] if compile else [])])

    built = {name: build(name, args_for, dist) for name in models}
    _, args, layout, gpt = built[models[0]]
    g = torch.Generator().manual_seed(args.seed)
    text = torch.randint(0, gpt.vocab_size, (layout.micro_batch_size, gpt.seq_length + 1),
                         generator=g).to(dist.device)
    batches = itertools.repeat({"tokens": text[:, :-1], "labels": text[:, 1:],
                                "loss_mask": torch.ones(layout.micro_batch_size, gpt.seq_length,
                                                        device=dist.device)})
    seconds = {name: [] for name in models}
    for r in range(a.warmup + a.rounds):
        for name in (models if r % 2 == 0 else list(reversed(models))):
            dist.sync()
            t0 = time.perf_counter()
            built[name][0].train_step(batches)
            dist.sync()
            if r >= a.warmup:
                seconds[name].append(time.perf_counter() - t0)

    tokens = layout.global_batch_size * gpt.seq_length
    flops = iteration_flops(gpt, layout.global_batch_size, args.recompute).model
    record = peer_record.header("llm_peers", dist)
    peak = device_peaks.lookup(record["device"])
    figures = {}
    for name in models:
        median = statistics.median(seconds[name])
        figures[name] = {
            "seconds_per_iteration": seconds[name],
            "median_s": median,
            "tokens_per_s": tokens / median,
            "model_tflops": flops / median / 1e12,
            "mfu": flops / median / 1e12 / peak.tflops if peak else None,
        }
    if REFERENCE in figures:
        for f in figures.values():
            f["vs_" + REFERENCE.replace("-", "_")] = figures[REFERENCE]["median_s"] / f["median_s"]
    record |= {
        "as_run": as_run_figures,
        "peak_tflops": peak.tflops if peak else None,
        "peak_source": peak.source if peak else "unknown device: no MFU",
        "model_size": a.model_size, "precision": a.precision, "seq_length": gpt.seq_length,
        "global_batch_size": layout.global_batch_size,
        "micro_batch_size": layout.micro_batch_size, "recompute": args.recompute,
        "rounds": a.rounds, "figures": figures,
    }
    path = peer_record.write(record, a.out, a.precision)
    print(f"# {record['device']}, {a.model_size} {a.precision}, global batch {layout.global_batch_size}"
          f" (micro-batch {layout.micro_batch_size})")
    status = as_run.report("# as run: the driver's torch backend against a plain loop",
                           "LLM driver (torch)", as_run_figures,
                           peer_record.print_table) if as_run_figures else 0
    print(f"# the step alone, median of {a.rounds} interleaved rounds")
    peer_record.print_table(
        ["model", "s/iteration", "tokens/s", "model TFLOP/s", "MFU", "vs HF compiled"],
        [[name, f"{f['median_s']:.4f}", f"{f['tokens_per_s']:.0f}", f"{f['model_tflops']:.1f}",
          f"{f['mfu']:.3f}" if f["mfu"] is not None else "n/a",
          f"{f['vs_hf_compiled']:.2f}x" if "vs_hf_compiled" in f else "n/a"]
         for name, f in figures.items()])
    print(f"# written: {path}")
    dist.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
