"""One training step, and the timed loop that runs it until a stop condition
holds on any rank."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from caraml import precision, report
from caraml.dist import Dist
from caraml.energy import TimedWindow
from caraml.stopping import StopCondition
from caraml.timing import IterationTimer, rate
from image_classification import model

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def sgd_step(net: nn.Module, optimizer: torch.optim.Optimizer, precision_name: str,
             device: torch.device) -> Step:
    """Forward, backward and update on one batch; returns the loss (not
    synchronised, so reading it is left to the caller)."""
    scaler = precision.grad_scaler(precision_name, device)

    def step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast(precision_name, device):
            loss = model.loss(net(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    return step


@dataclass
class LoopResult:
    iterations: int          # run, warm-up included
    durations: list[float]   # of the timed iterations only
    loss: float | None       # of the last iteration, this rank's batch
    stop_reason: str | None  # None: this rank stopped because another one had to


def run(step: Step, batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
        timer: IterationTimer, stop: StopCondition, dist: Dist,
        total_iterations: int, log_interval: int,
        timed_window: TimedWindow | None = None) -> LoopResult:
    """Runs steps until `stop` holds on any rank, so all ranks leave after the
    same iteration (the all-reduce behind that is outside the timing). A
    step's time includes fetching its batch onto the device."""
    done = 0
    loss = None
    timed_window = timed_window or TimedWindow(None, sync=lambda: None)
    while True:
        reason = stop.reason(done)
        if dist.any_rank(reason is not None):
            break
        if done == timer.warmup:
            timed_window.begin()
        timer.start()
        images, labels = next(batches)
        loss = step(images, labels)
        seconds = timer.stop()
        done += 1
        if dist.is_main and done % log_interval == 0:
            phase = " (warm-up)" if done <= timer.warmup else ""
            report.write_line(f"iteration {done}/{total_iterations}{phase}: loss {loss.item():.4f}, "
                              f"{seconds:.3f} s, {rate(len(labels), seconds):.1f} images/s on rank 0")
    timed_window.end()
    return LoopResult(done, list(timer.durations),
                      None if loss is None else loss.item(), reason)


def stop_reason(reasons_by_rank: list[str | None]) -> str:
    """Why the run stopped, in words: rank 0's own reason, else that of the
    first rank that had one (a signal or a wall-clock budget seen there first)."""
    rank, reason = next((r, why) for r, why in enumerate(reasons_by_rank) if why is not None)
    return reason if rank == 0 else f"{reason} on rank {rank}"
