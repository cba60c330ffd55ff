"""Image-classification training benchmark: trains a torchvision model from
scratch on synthetic or ImageFolder data, on one device or with DDP under
torchrun, and prints images/s per rank and in total (CARAML lines) while
jpwr measures each rank's energy. Usage: docs/image_classification.md."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):
    # Started as a script: the suite's packages live one folder up.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from caraml import compile_toolchain, driver, memory, precision, report, throughput
from caraml.dist import Dist
from caraml.driver import EnergyMeter, LoopResult
from caraml.report import BenchmarkInputError
from caraml.stopping import StopCondition
from caraml.timing import rate
from image_classification import config, data, model, train
from image_classification.config import Options

# The usual ImageNet recipe for ResNets (He et al.): SGD with momentum.
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4


def batches(args: Options, dist: Dist, batch_size: int) -> Iterator[data.Batch]:
    if args.data == config.SYNTHETIC:
        return data.synthetic(batch_size, args.image_size, args.num_classes, dist.device,
                              args.channels_last, seed=args.seed + dist.rank,
                              ranks_per_host=dist.local_world_size)
    return data.image_folder(args.data, batch_size, args.image_size, args.num_classes,
                             args.num_workers, dist, args.channels_last, args.seed)


def describe(args: Options, dist: Dist, batch_size: int, parameters: int) -> str:
    on_off = {True: "on", False: "off"}
    return (f"{args.model} ({parameters / 1e6:.1f} M parameters), {args.precision}, "
            f"channels_last {on_off[args.channels_last]}, compile {on_off[args.compile]}; "
            f"data {args.data}, {args.image_size}x{args.image_size} images; global batch "
            f"{args.global_batch_size} = {dist.world_size} {dist.device.type} device(s) x "
            f"{batch_size}; {args.train_iters} iterations, "
            f"{args.warmup_iters} of them warm-up")


def progress(args: Options) -> driver.Progress:
    def line(done: int, seconds: float, loss: float) -> str:
        phase = " (warm-up)" if done <= args.warmup_iters else ""
        return (f"iteration {done}/{args.train_iters}{phase}: loss {loss:.4f}, "
                f"{seconds:.3f} s per iteration, "
                f"{rate(args.global_batch_size, seconds):.1f} images/s")
    return line


def train_model(args: Options, dist: Dist, batch_size: int, stop: StopCondition,
                energy: EnergyMeter) -> LoopResult:
    """Builds data and model, and trains. The DDP model must be gone before
    the process group is destroyed, so it lives only in this frame: were its
    reducer to hold the group's last reference, the group would be destroyed
    with the GIL held and could deadlock with a gloo thread that needs the
    GIL (seen with torch 2.13 in 2-rank gloo runs)."""
    source = batches(args, dist, batch_size)
    precision.set_fp32_math(args.precision, dist.device)
    if dist.device.type == "cuda":
        # Input shapes never change, so cuDNN may time its algorithms once
        # (in the warm-up) and keep the fastest.
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(args.seed)
    net = model.build(args.model, args.num_classes, dist.device, args.channels_last)
    model.check_trainable(net, args.model, args.image_size, batch_size, dist.device)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=MOMENTUM,
                                weight_decay=WEIGHT_DECAY)
    step = train.sgd_step(model.parallelize(net, dist, args.compile), optimizer,
                          args.precision, dist.device)
    if dist.is_main:
        report.write_line(describe(args, dist, batch_size, model.parameter_count(net)))
    return driver.train_loop(lambda: step(*next(source)), args, dist, stop, energy,
                             progress(args))


def placement(args: Options, dist: Dist) -> int:
    """The batch per device, once the devices are known to take it."""
    config.check_placement(args, dist.world_size, dist.device)
    if args.compile:
        compile_toolchain.check_on(dist.device.type, "--compile")
    return args.global_batch_size // dist.world_size


def train_and_report(args: Options, dist: Dist, stop: StopCondition,
                     energy: EnergyMeter) -> int:
    batch_size = driver.agreed(dist, lambda: placement(args, dist))
    try:
        result = train_model(args, dist, batch_size, stop, energy)
    except torch.OutOfMemoryError:
        raise BenchmarkInputError(memory.out_of_memory(
            batch_size, dist.device, "lower the global batch size or use more devices")) from None
    def global_line(job):
        return {
            "model": args.model,
            "precision": args.precision,
            "devices": dist.world_size,
            "global_batch_size": args.global_batch_size,
            "batch_size_per_device": batch_size,
            **(throughput.overall("images", args.global_batch_size, job, dist.world_size) if job else {}),
            "samples_total": args.global_batch_size * result.iterations,
            "samples_timed": args.global_batch_size * (job.iterations if job else 0),
        }

    def rank_line(durations: list[float]) -> dict:
        return throughput.per_rank("images", batch_size, durations)

    return driver.report_result(dist, result, rank_line=rank_line, global_line=global_line)


def parse(argv: list[str] | None) -> Options | int:
    """The options, checked; 0 where --list-models only asked for the names."""
    args = config.parse(argv)
    return driver.listed_or_checked(args, args.list_models, model.names, config.check_input)


def main(argv: list[str] | None = None) -> int:
    return driver.main(argv, parse, train_and_report)


if __name__ == "__main__":
    sys.exit(main())
