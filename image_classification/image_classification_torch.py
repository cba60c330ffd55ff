"""Image-classification training benchmark: trains a torchvision model from
scratch on synthetic or ImageFolder data, on one device or with DDP under
torchrun, and prints images/s per rank and in total (CARAML lines) while
jpwr measures each rank's energy. Usage: docs/image_classification.md."""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    # Started as a script: the suite's packages live one folder up.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import contextlib
import traceback
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import torch

from caraml import dist as caraml_dist
from caraml import memory, precision, provenance, report
from caraml.dist import Dist
from caraml.energy import TimedWindow
from caraml.report import BenchmarkInputError
from caraml.stopping import StopCondition
from caraml.timing import IterationTimer
from image_classification import config, data, model, throughput, train

EnergyMeter = Callable[[int], AbstractContextManager]

# The usual ImageNet recipe for ResNets (He et al.): SGD with momentum.
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4


def energy_meter(args: argparse.Namespace) -> EnergyMeter:
    """rank -> a context that measures that rank's energy. jpwr is imported
    here, so a missing one is an input error before training, not after."""
    if not config.measures_energy(args):
        return lambda rank: contextlib.nullcontext()
    try:
        from caraml.energy import measured
    except ImportError as e:
        raise BenchmarkInputError(
            f"--energy-methods {' '.join(args.energy_methods)} needs jpwr, which does not "
            f"import here ({e}); pass --energy-methods none to train without measuring "
            f"energy") from None
    return lambda rank: measured(args.energy_dir, rank, args.energy_methods,
                                 args.energy_interval_ms)


def batches(args: argparse.Namespace, dist: Dist, batch_size: int) -> Iterator[data.Batch]:
    if args.data == config.SYNTHETIC:
        return data.synthetic(batch_size, args.image_size, args.num_classes, dist.device,
                              args.channels_last, seed=args.seed + dist.rank)
    return data.image_folder(args.data, batch_size, args.image_size, args.num_classes,
                             args.num_workers, dist, args.channels_last, args.seed)


def describe(args: argparse.Namespace, dist: Dist, batch_size: int, parameters: int) -> str:
    on_off = {True: "on", False: "off"}
    return (f"{args.model} ({parameters / 1e6:.1f} M parameters), {args.precision}, "
            f"channels_last {on_off[args.channels_last]}, compile {on_off[args.compile]}; "
            f"data {args.data}, {args.image_size}x{args.image_size} images; global batch "
            f"{args.global_batch_size} = {dist.world_size} {dist.device.type} device(s) x "
            f"{batch_size}; {args.iterations} iterations, "
            f"{args.warmup_iterations} of them warm-up")


def summarise(args: argparse.Namespace, dist: Dist, batch_size: int,
              result: train.LoopResult) -> int:
    """Prints the result lines on rank 0; returns the exit status."""
    timed = bool(result.durations)  # the same on every rank: they stop together
    durations_by_rank = dist.gather_floats(result.durations) if timed else []
    reasons, hosts = zip(*dist.gather_objects((result.stop_reason, dist.hostname)), strict=True)
    reason, nodes = train.stop_reason(list(reasons)), len(set(hosts))
    peak_memory = memory.peak(dist)
    if not dist.is_main:
        return 0 if timed else 1
    report.stop(reason)
    for rank, durations in enumerate(durations_by_rank):
        report.emit(f"rank {rank}", **throughput.per_rank(batch_size, durations))
    summary = {
        "model": args.model,
        "precision": args.precision,
        "devices": dist.world_size,
        "nodes": nodes,
        "global_batch_size": args.global_batch_size,
        "batch_size_per_device": batch_size,
        "iterations": len(result.durations),
        "iterations_total": result.iterations,
    }
    if timed:
        summary |= throughput.overall(args.global_batch_size, durations_by_rank)
    summary["samples_total"] = args.global_batch_size * result.iterations
    summary |= peak_memory
    if result.loss is not None:
        summary["loss"] = result.loss
    report.emit("global", **summary)
    if not timed:
        report.error(f"no throughput figure: the run stopped ({reason}) after "
                     f"{result.iterations} iteration(s), all of them warm-up")
        return 1
    return 0


def train_model(args: argparse.Namespace, dist: Dist, batch_size: int, stop: StopCondition,
                energy: EnergyMeter) -> train.LoopResult:
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
    timer = IterationTimer(args.warmup_iterations, sync=dist.sync)
    # The file goes with the energy files; a run that measures none has no folder to litter.
    provenance.record(dist, args.energy_dir if config.measures_energy(args) else None)
    if dist.is_main:
        report.write_line(describe(args, dist, batch_size, model.parameter_count(net)))
    with energy(dist.rank) as scope:
        result = train.run(step, source, timer, stop, dist, args.iterations, args.log_interval,
                           TimedWindow(scope, dist.sync))
    if dist.is_main:
        provenance.report_load_at_end()
    return result


def train_and_report(args: argparse.Namespace, stop: StopCondition,
                     energy: EnergyMeter) -> int:
    try:
        dist = caraml_dist.init(args.device)
    except RuntimeError as e:  # e.g. --device cuda without a GPU
        raise BenchmarkInputError(str(e)) from None
    try:
        config.check_placement(args, dist.world_size, dist.device)
        batch_size = args.global_batch_size // dist.world_size
        try:
            result = train_model(args, dist, batch_size, stop, energy)
        except torch.OutOfMemoryError:
            raise BenchmarkInputError(memory.out_of_memory(
                batch_size, dist.device, "lower the global batch size or use more devices")) from None
        except BaseException as e:
            # A traceback keeps train_model's frame, and the DDP model in it,
            # alive; free it before the process group goes (see train_model).
            traceback.clear_frames(e.__traceback__)
            raise
        return summarise(args, dist, batch_size, result)
    finally:
        dist.close()


def main(argv: list[str] | None = None) -> int:
    args = config.parse(argv)
    if args.list_models:
        print("\n".join(model.names()))
        return 0
    try:
        config.check_input(args)
        energy = energy_meter(args)
        budget_s = None if args.exit_duration_in_mins is None else args.exit_duration_in_mins * 60
        # Entered before set-up: a signal while the model is built still ends
        # the run cleanly, and the wall-clock budget counts set-up time.
        with StopCondition(max_iterations=args.iterations, max_seconds=budget_s) as stop:
            return train_and_report(args, stop, energy)
    except BenchmarkInputError as e:
        report.error(str(e))
        return 2


if __name__ == "__main__":
    sys.exit(main())
