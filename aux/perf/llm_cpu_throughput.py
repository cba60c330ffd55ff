"""CPU training throughput of the LLM benchmark's torch backend, side by side
with Hugging Face transformers' GPT-2 (GPT2LMHeadModel) of the same shape,
batch and optimizer, at fp32 and with bf16 autocast. Each figure comes as
tokens/s and as model FLOP/s over this machine's matmul rate at the same
precision, all measured in one run. Run from the repository root:

    .venv/bin/python aux/perf/llm_cpu_throughput.py [--model-size cpu-small] [--rounds 20]

Every round runs one step of each model (the order swaps every round) and
half a second of matmuls, so load from other processes on a shared machine
hits all three alike; the table gives the best round (the least disturbed)
and the median round. The figures and the
command that produced them are recorded in docs/llm_training.md. This is a
benchmark, not a test: it prints numbers and judges nothing."""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from caraml.node import dist as caraml_dist
from caraml.node.precision import DTYPES
from llm_training import arguments
from llm_training.flops import iteration_flops
from llm_training.matmul_rate import measure_tflops
from llm_training.torch_backend import TorchBackend

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_gpt2 import HuggingFaceGPT2


def cpu_name() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def measure(precision: str, size: str, global_batch: int | None, rounds: int, warmup: int,
            dist) -> dict[str, list[float]]:
    """Seconds per iteration of each model and the matmul rate (FLOP/s),
    once per round each, and the model FLOPs and tokens of one iteration."""
    flags = ["--model-size", size, "--synthetic", "--precision", precision,
             "--train-iters", "2", "--energy-methods", "none"]
    if global_batch:
        flags += ["--global-batch-size", str(global_batch)]
    args = arguments.parse(flags)
    layout = arguments.resolve_layout(args, world_size=1)
    gpt = arguments.gpt_config(args, args.vocab_size)
    g = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, args.vocab_size, (layout.micro_batch_size, gpt.seq_length + 1),
                           generator=g)
    batches = itertools.repeat({"tokens": tokens[:, :-1], "labels": tokens[:, 1:],
                                "loss_mask": torch.ones(layout.micro_batch_size, gpt.seq_length)})
    models = {"ours": TorchBackend(gpt, args, layout, dist),
              "hf": HuggingFaceGPT2(args, gpt, layout.microbatches, dist.device)}

    samples = {"ours": [], "hf": [], "matmul": []}
    for r in range(warmup + rounds):
        for name in (list(models) if r % 2 == 0 else list(reversed(models))):
            t0 = time.perf_counter()
            models[name].train_step(batches)
            samples[name].append(time.perf_counter() - t0)
        samples["matmul"].append(measure_tflops(dist.device, DTYPES[precision], seconds=0.5) * 1e12)
    samples = {k: v[warmup:] for k, v in samples.items()}
    samples["flops"] = iteration_flops(gpt, layout.global_batch_size, args.recompute).model
    samples["tokens"] = layout.global_batch_size * gpt.seq_length
    return samples


def rows(precision: str, s: dict) -> list[str]:
    """Table rows: the best round (least disturbed by other load: the fastest
    step, the highest matmul rate) and the median round."""
    out = []
    for name, label in (("ours", "torch backend"), ("hf", "HF GPT2LMHeadModel")):
        for pick, t, matmul in (("best", min(s[name]), max(s["matmul"])),
                                ("median", statistics.median(s[name]),
                                 statistics.median(s["matmul"]))):
            other = min(s["hf"]) if pick == "best" else statistics.median(s["hf"])
            speed = f"{other / t:.2f}x" if name == "ours" else ""
            out.append(f"| {precision} | {label} | {pick} | {t:.3f} | {s['tokens'] / t:.0f} | "
                       f"{s['flops'] / t / 1e9:.1f} | {matmul / 1e9:.1f} | "
                       f"{s['flops'] / t / matmul:.2f} | {speed} |")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-size", default="cpu-small")
    p.add_argument("--global-batch-size", type=int)
    p.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    p.add_argument("--rounds", type=int, default=20, help="timed rounds at fp32")
    p.add_argument("--bf16-rounds", type=int, default=3,
                   help="timed rounds at 16-bit (slow on CPUs without AVX-512/AMX)")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    a = p.parse_args()
    warnings.filterwarnings("ignore")
    dist = caraml_dist.init("cpu")
    print(f"# {cpu_name()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; load average {os.getloadavg()[0]:.2f} at start")
    print("| precision | model | round | s/iteration | tokens/s | model GFLOP/s | "
          "matmul GFLOP/s | model FLOP/s / matmul | ours vs HF |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for precision in a.precisions:
        rounds = a.rounds if precision == "fp32" else a.bf16_rounds
        warmup = a.warmup if precision == "fp32" else 1
        samples = measure(precision, a.model_size, a.global_batch_size, rounds, warmup, dist)
        print("\n".join(rows(precision, samples)), flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
