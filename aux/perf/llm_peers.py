"""Training throughput of the LLM benchmark's backends side by side with
Hugging Face transformers' GPT-2 at the same shape, precision, batch and
optimizer, in one process on one device, interleaved round by round so that
a clock change or another job hits every model alike. Meant for a GPU
(the megatron backend needs one); on a CPU it measures the rest.

    .venv/bin/python aux/perf/llm_peers.py [--model-size 800M] [--precision bf16]
        [--global-batch-size 64] [--micro-batch-size 4] [--rounds 10]
        [--models megatron torch torch-compiled hf hf-compiled] [--out docs/perf]

Writes one JSON file per run into --out (machine, device, driver, versions,
every round's time, tokens/s, model TFLOP/s, MFU against the datasheet peak,
and each model's ratio to the compiled Hugging Face model) and prints a
markdown table for docs/results.md. A benchmark, not a test: it judges
nothing."""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer_record  # noqa: E402
import torch  # noqa: E402
from hf_gpt2 import HuggingFaceGPT2  # noqa: E402

from caraml import device_peaks  # noqa: E402
from caraml.node import dist as caraml_dist  # noqa: E402
from llm_training import arguments  # noqa: E402
from llm_training.flops import iteration_flops  # noqa: E402

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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-size", default="800M")
    p.add_argument("--precision", default="bf16")
    p.add_argument("--global-batch-size", type=int, default=64)
    p.add_argument("--micro-batch-size", type=int, default=4)
    p.add_argument("--recompute-activations", default="none")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3, help="untimed rounds first (compilation)")
    p.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    p.add_argument("--out", type=Path, default=peer_record.OUT)
    a = p.parse_args()
    warnings.filterwarnings("ignore")
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
        "peak_tflops": peak.tflops if peak else None,
        "peak_source": peak.source if peak else "unknown device: no MFU",
        "model_size": a.model_size, "precision": a.precision, "seq_length": gpt.seq_length,
        "global_batch_size": layout.global_batch_size,
        "micro_batch_size": layout.micro_batch_size, "recompute": args.recompute,
        "rounds": a.rounds, "figures": figures,
    }
    path = peer_record.write(record, a.out, a.precision)
    print(f"# {record['device']}, {a.model_size} {a.precision}, global batch {layout.global_batch_size}"
          f" (micro-batch {layout.micro_batch_size}), median of {a.rounds} interleaved rounds")
    peer_record.print_table(
        ["model", "s/iteration", "tokens/s", "model TFLOP/s", "MFU", "vs HF compiled"],
        [[name, f"{f['median_s']:.4f}", f"{f['tokens_per_s']:.0f}", f"{f['model_tflops']:.1f}",
          f"{f['mfu']:.3f}" if f["mfu"] is not None else "n/a",
          f"{f['vs_hf_compiled']:.2f}x" if "vs_hf_compiled" in f else "n/a"]
         for name, f in figures.items()])
    print(f"# written: {path}")
    dist.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
