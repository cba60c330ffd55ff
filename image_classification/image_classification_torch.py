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

from caraml import report
from caraml.node import data_parallel, driver, memory, precision
from caraml.node.dist import Dist
from caraml.node.driver import EnergyMeter, LoopResult
from caraml.node.loader_workers import loader_workers
from caraml.node.stopping import StopCondition
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
                             loader_workers(args.num_workers, dist.device.type), dist,
                             args.channels_last, args.seed)


def describe(args: Options, dist: Dist, batch_size: int, parameters: int) -> str:
    on_off = {True: "on", False: "off"}
    return (f"{args.model} ({parameters / 1e6:.1f} M parameters), {args.precision}, "
            f"channels_last {on_off[args.channels_last]}, compile {on_off[args.compile]}; "
            f"data {args.data}, {args.image_size}x{args.image_size} images; global batch "
            f"{args.global_batch_size} = {dist.world_size} {dist.device.type} device(s) x "
            f"{batch_size}; {args.train_iters} iterations, "
            f"{args.warmup_iters} of them warm-up")


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
                             data_parallel.progress(args, "images", ".4f"))


def compiling(args: Options) -> str | None:
    """The option that makes this run compile kernels, if any."""
    return "--compile" if args.compile else None


def train_and_report(args: Options, dist: Dist, stop: StopCondition,
                     energy: EnergyMeter) -> int:
    batch_size = data_parallel.batch_per_device(args, dist, compiling(args))
    with memory.out_of_memory_is_input(batch_size, dist.device,
                                       "lower the global batch size or use more devices"):
        result = train_model(args, dist, batch_size, stop, energy)
    return data_parallel.report_result(args, dist, result, batch_size, "images",
                                       head={"model": args.model, "precision": args.precision,
                                             "num_classes": args.num_classes})


def main(argv: list[str] | None = None) -> int:
    return data_parallel.main(argv, config.parse, lambda args: args.list_models, model.names,
                              config.check_input, train_and_report)


if __name__ == "__main__":
    sys.exit(main())
