"""The shell of a data-parallel driver, where every device trains on an equal
share of a global batch of whole samples (images, operator samples): the
batch per device once the devices are known, the progress line, and the
summary lines of every rank and of the job. A driver keeps only what is its
own (options, data, model, step, and the fields its lines add) and hands the
rest to the driver core (caraml/node/driver.py) through this."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import torch

from caraml.node import compile_toolchain, driver, precision, throughput
from caraml.node.dist import Dist
from caraml.node.driver import LoopResult, Opts
from caraml.node.timing import TimingStats, rate
from caraml.report import BenchmarkInputError


class DataParallel(Protocol):
    """What the shell reads of a data-parallel driver's options, beside the
    driver core's: a global batch of whole samples and a precision."""

    @property
    def global_batch_size(self) -> int: ...
    @property
    def precision(self) -> str: ...
    @property
    def warmup_iters(self) -> int: ...
    @property
    def planned(self) -> str: ...



def check_placement(args: DataParallel, world_size: int, device: torch.device) -> None:
    """Checks of the options (global_batch_size, precision) that depend on
    how many devices there are and of which kind."""
    if args.global_batch_size % world_size:
        raise BenchmarkInputError(
            f"global batch size {args.global_batch_size} does not divide by "
            f"{world_size} devices")
    precision.check(args.precision, device)


def placement(args: DataParallel, dist: Dist, compiling: str | None = None) -> int:
    """The batch per device, once this rank's devices are known to take it:
    the placement checks and, for a driver that compiles (`compiling` names
    its option), the compiler torch.compile needs on this device."""
    check_placement(args, dist.world_size, dist.device)
    if compiling is not None:
        compile_toolchain.check_on(dist.device.type, compiling)
    return args.global_batch_size // dist.world_size


def batch_per_device(args: DataParallel, dist: Dist, compiling: str | None = None) -> int:
    """placement() agreed by every rank."""
    return driver.agreed(dist, lambda: placement(args, dist, compiling))


def progress(args: DataParallel, unit: str, loss_format: str) -> driver.Progress:
    """The progress line: iteration, loss, time per iteration and rate."""
    def line(done: int, seconds: float, loss: float) -> str:
        phase = " (warm-up)" if done <= args.warmup_iters else ""
        return (f"iteration {done}/{args.planned}{phase}: loss {loss:{loss_format}}, "
                f"{seconds:.3f} s per iteration, "
                f"{rate(args.global_batch_size, seconds):.1f} {unit}/s")
    return line


def main(argv: Sequence[str] | None, parse: Callable[[Sequence[str] | None], Opts],
         listing: Callable[[Opts], bool], names: Callable[[], Iterable[str]],
         check: Callable[[Opts], None], train: driver.Train[Opts]) -> int:
    """A data-parallel driver from its command line to its exit status:
    parse(argv) gives the options, check(options) refuses bad input before
    any process group exists, and where listing(options) holds the driver
    only prints the names it knows (--list-models, --list-problems)."""
    def options(argv: Sequence[str] | None) -> Opts | int:
        args = parse(argv)
        return driver.listed_or_checked(args, listing(args), names, check)
    return driver.main(argv, options, train)


def report_result(args: DataParallel, dist: Dist, result: LoopResult, batch_size: int, unit: str, *,
                  head: dict, tail: dict | None = None,
                  figures: Callable[[TimingStats], dict] | None = None) -> int:
    """The summary: each rank's rate, and the job's line: the driver's
    `head` fields, the devices and batch, the timing figures (`figures` of
    the job's iterations, by default throughput.overall's), the work done,
    and the driver's `tail` fields."""
    def timing(job: TimingStats) -> dict:
        return figures(job) if figures else throughput.overall(unit, args.global_batch_size, job,
                                                                dist.world_size)

    def global_line(job: TimingStats | None) -> dict:
        return {**head, "devices": dist.world_size, "global_batch_size": args.global_batch_size,
                "batch_size_per_device": batch_size, **(timing(job) if job else {}),
                "samples_total": args.global_batch_size * result.iterations,
                "samples_timed": args.global_batch_size * (job.iterations if job else 0),
                **(tail or {})}

    def rank_line(durations: list[float]) -> dict:
        return throughput.per_rank(unit, batch_size, durations)

    # one iteration's work: the global batch, as samples_timed counts it
    return driver.report_result(dist, result, rank_line=rank_line, global_line=global_line,
                                work={"unit": unit, "work_per_iteration": args.global_batch_size})
