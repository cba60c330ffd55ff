"""The image benchmark against a plain torchvision training loop (autocast,
gradient scaler, channels_last, the batch copied from pinned host memory
on a GPU), in two ways:

- as it runs: the image driver started as JUBE starts it (synthetic data,
  its loop, timing and stop condition, jpwr measuring) by turns with a
  plain loop in a process of its own over the same network, optimizer and
  batch size (aux/perf/as_run.py), at the first batch size;
- the step alone: the benchmark's own step and data source and the plain
  loop (and the plain loop on a batch already on the device) in one
  process, interleaved round by round at every batch size.

Defaults that fit the host: ResNet-50 fp16 at 224 px on a GPU, ResNet-18
fp32 at 64 px (the CPU system's configuration) on a CPU.

    .venv/bin/python aux/perf/ic_peers.py [--model M] [--precision P] [--image-size S]
        [--batch-sizes B ...] [--rounds 5] [--iterations 5] [--as-run-rounds 8]
        [--as-run-iterations 160] [--as-run-slice S]
        [--out docs/perf]

Writes one JSON file per run into --out (machine, device, driver, versions,
every round's figures, the ratios) and prints markdown tables for
docs/results.md. A benchmark, not a test: it judges nothing."""

from __future__ import annotations

import argparse
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
import torchvision  # noqa: E402

from caraml.node import dist as caraml_dist  # noqa: E402
from caraml.node import precision as caraml_precision  # noqa: E402
from image_classification import config, data, model, train  # noqa: E402
from image_classification.image_classification_torch import MOMENTUM, WEIGHT_DECAY  # noqa: E402

LR = 0.1  # the driver's default
CLASSES = 1000


def suite_loop(name: str, precision: str, batch: int, size: int, device: torch.device):
    """The benchmark's own pieces, as the driver wires them."""
    torch.manual_seed(0)
    net = model.build(name, CLASSES, device, channels_last=True)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    step = train.sgd_step(net, opt, precision, device)
    source = data.synthetic(batch, size, CLASSES, device, channels_last=True, seed=0)
    return lambda: step(*next(source))


def plain_loop(name: str, precision: str, batch: int, size: int, device: torch.device,
               on_device: bool):
    """What a user would write from the PyTorch AMP recipe."""
    torch.manual_seed(0)
    net = getattr(torchvision.models, name)(num_classes=CLASSES).to(
        device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    dtype = caraml_precision.DTYPES[precision]
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    images = torch.randn(batch, 3, size, size).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(CLASSES, (batch,))
    if device.type == "cuda":
        images, labels = images.pin_memory(), labels.pin_memory()
    if on_device:
        images = images.to(device, memory_format=torch.channels_last)
        labels = labels.to(device)

    def step():
        x = images.to(device, non_blocking=True, memory_format=torch.channels_last)
        y = labels.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=precision in ("fp16", "bf16")):
            loss = torch.nn.functional.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


GPU_DEFAULTS = {"model": "resnet50", "precision": "fp16", "image_size": 224, "batch_sizes": [256, 1024]}
CPU_DEFAULTS = {"model": "resnet18", "precision": "fp32", "image_size": 64, "batch_sizes": [16]}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model")
    p.add_argument("--precision")
    p.add_argument("--image-size", type=int)
    p.add_argument("--batch-sizes", type=int, nargs="+")
    p.add_argument("--iterations", type=int, default=5, help="steps per loop and round (step alone)")
    # a ResNet-18 iteration on a CPU takes about 0.2 s: a turn of 4 s spans
    # about 20, and 160 of them about 8 turns
    as_run.add_arguments(p, warmup=2, iterations=160, slice_s=4.0)
    p.add_argument("--out", type=Path, default=peer_record.OUT)
    a = p.parse_args()
    for key, value in (GPU_DEFAULTS if torch.cuda.is_available() else CPU_DEFAULTS).items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    return a


def plain_process(a: argparse.Namespace) -> int:
    """--plain: the plain loop alone, timed for aux/perf/as_run.py"""
    dist = caraml_dist.init("auto")
    caraml_precision.set_fp32_math(a.precision, dist.device)
    if dist.device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    step = plain_loop(a.model, a.precision, a.batch_sizes[0], a.image_size, dist.device, False)
    as_run.time_plain(step, a.warmup, a.as_run_iterations, dist.sync)
    dist.close()
    return 0


def as_run_comparison(a: argparse.Namespace, device: str) -> dict:
    batch = a.batch_sizes[0]
    with tempfile.TemporaryDirectory() as energy:
        driver_args = [
            "-m", "image_classification.image_classification_torch", "--model", a.model,
            "--data", config.SYNTHETIC, "--image-size", str(a.image_size),
            "--global-batch-size", str(batch), "--precision", a.precision, "--channels-last",
            "--train-iters", str(a.warmup + a.as_run_iterations), "--warmup-iters", str(a.warmup),
            "--energy-dir", energy, "--energy-methods", "auto", "--device", device]
        plain_args = ["--model", a.model, "--precision", a.precision, "--image-size",
                      str(a.image_size), "--batch-sizes", str(batch), "--warmup", str(a.warmup),
                      "--as-run-iterations", str(a.as_run_iterations)]
        env = dict(os.environ)
        figures = as_run.compare(a, device, driver_args, Path(__file__), plain_args, env)
    return {"global_batch": batch} | figures


def step_comparison(a: argparse.Namespace, dist) -> dict:
    device = dist.device
    caraml_precision.check(a.precision, device)
    caraml_precision.set_fp32_math(a.precision, device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # as the driver sets it
    results = {}
    for batch in a.batch_sizes:
        loops = {
            "suite": suite_loop(a.model, a.precision, batch, a.image_size, device),
            "plain": plain_loop(a.model, a.precision, batch, a.image_size, device, False),
            "plain-on-device": plain_loop(a.model, a.precision, batch, a.image_size, device, True),
        }
        rates = {name: [] for name in loops}
        for r in range(a.warmup + a.rounds):
            for name in (list(loops) if r % 2 == 0 else list(reversed(loops))):
                dist.sync()
                t0 = time.perf_counter()
                for _ in range(a.iterations):
                    loops[name]()
                dist.sync()
                if r >= a.warmup:
                    rates[name].append(batch * a.iterations / (time.perf_counter() - t0))
        median = {name: statistics.median(v) for name, v in rates.items()}
        results[str(batch)] = {"images_per_s": rates, "median": median,
                               "suite_vs_plain": median["suite"] / median["plain"],
                               "suite_vs_plain_on_device": median["suite"] / median["plain-on-device"]}
        del loops
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return results


def main() -> int:
    a = parse()
    warnings.filterwarnings("ignore")
    if a.plain:
        return plain_process(a)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    as_run_figures = as_run_comparison(a, device) if a.as_run_rounds else None
    dist = caraml_dist.init("auto")
    results = step_comparison(a, dist)
    record = peer_record.header("ic_peers", dist) | {
        "model": a.model, "precision": a.precision, "image_size": a.image_size,
        "rounds": a.rounds, "iterations_per_round": a.iterations, "as_run": as_run_figures,
        "batch_sizes": results,
    }
    path = peer_record.write(record, a.out, a.model, a.precision)
    print(f"# {record['device']}, {a.model} {a.image_size}px {a.precision} channels_last")
    status = as_run.report(f"# as run: the driver against a plain loop, global batch "
                           f"{as_run_figures['global_batch']}", "image driver", as_run_figures,
                           peer_record.print_table) if as_run_figures else 0
    print(f"# the step alone, median images/s of {a.rounds} interleaved rounds")
    peer_record.print_table(
        ["global batch", "suite", "plain loop", "plain, data on device", "suite / plain"],
        [[str(batch), f"{r['median']['suite']:.0f}", f"{r['median']['plain']:.0f}",
          f"{r['median']['plain-on-device']:.0f}", f"{r['suite_vs_plain']:.2f}x"]
         for batch, r in results.items()])
    print(f"# written: {path}")
    dist.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
