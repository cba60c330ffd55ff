"""Training throughput of the image benchmark's own step and data source
side by side with a plain torchvision training loop (autocast, gradient
scaler, channels_last, the batch copied from pinned host memory), and with
the same plain loop on a batch that already sits on the device. One
process, one device, interleaved round by round at every batch size, so a
clock change or another job hits every loop alike. Meant for a GPU.

    .venv/bin/python aux/perf/ic_peers.py [--model resnet50] [--precision fp16]
        [--batch-sizes 64 128 256 512 1024] [--rounds 10] [--iterations 5] [--out docs/perf]

Writes one JSON file per run into --out (machine, device, driver, versions,
every round's images/s, and the suite's ratio to the plain loop per batch
size) and prints a markdown table for docs/results.md. A benchmark, not a
test: it judges nothing."""

from __future__ import annotations

import argparse
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
import torchvision  # noqa: E402

from caraml.node import dist as caraml_dist  # noqa: E402
from caraml.node import precision as caraml_precision  # noqa: E402
from image_classification import data, model, train  # noqa: E402
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
    images = torch.randn(batch, 3, size, size)
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--precision", default="fp16")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--iterations", type=int, default=5, help="steps per loop and round")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    p.add_argument("--out", type=Path, default=peer_record.OUT)
    a = p.parse_args()
    warnings.filterwarnings("ignore")
    dist = caraml_dist.init("auto")
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
    record = peer_record.header("ic_peers", dist) | {
        "model": a.model, "precision": a.precision, "image_size": a.image_size,
        "rounds": a.rounds, "iterations_per_round": a.iterations, "batch_sizes": results,
    }
    path = peer_record.write(record, a.out, a.model, a.precision)
    print(f"# {record['device']}, {a.model} {a.image_size}px {a.precision} channels_last, "
          f"median images/s of {a.rounds} interleaved rounds")
    peer_record.print_table(
        ["global batch", "suite", "plain loop", "plain, data on device", "suite / plain"],
        [[str(batch), f"{r['median']['suite']:.0f}", f"{r['median']['plain']:.0f}",
          f"{r['median']['plain-on-device']:.0f}", f"{r['suite_vs_plain']:.2f}x"]
         for batch, r in results.items()])
    print(f"# written: {path}")
    dist.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
