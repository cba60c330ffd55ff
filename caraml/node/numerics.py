"""The numerics of a run: the loss of every iteration and the updates a
gradient scaler skipped, so that a row of a run that diverged, or of a
device or precision that computes garbage fast, can be told from a
measurement (the row model's verdict decides; the benchmark table declares
the band a benchmark's loss must keep).

The driver core's loop reads each step's loss once (it logs the interval's
mean in its progress lines) and keeps here what the summary line needs:

- loss_first: the first iteration's loss, mean over the ranks that have one:
  the loss of a model that has learnt nothing yet;
- loss_nonfinite, loss_nonfinite_at: the first loss that is not finite
  (nan, inf) on any rank, and its iteration, counted from 1 as the
  progress lines count (absent where every loss was finite);
- skipped_iterations: the timed iterations whose optimizer update was
  skipped (Megatron-LM's "number of skipped iterations": a gradient scaler
  found inf or nan gradients), the most of any rank.

It keeps every iteration's loss and skip too, the raw evidence those
fields are made from (series; caraml/node/iterations.py writes it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple, SupportsFloat

import torch

from caraml.node.dist import Dist


class Stepped(NamedTuple):
    """What a training step that may skip its update returns to the loop:
    this rank's loss (a number or a 0-d tensor; None where the rank has
    none, as pipeline stages before the last) and whether the update was
    skipped. A step that never skips may return the loss alone."""

    loss: float | torch.Tensor | None
    skipped: bool = False


def outcome(returned: object) -> tuple[float | None, bool]:
    """A step's return as (loss or None, skipped)."""
    loss, skipped = (returned.loss, returned.skipped) if isinstance(returned, Stepped) else (returned, False)
    if loss is None:
        return None, bool(skipped)
    if not isinstance(loss, SupportsFloat):
        raise TypeError(f"a training step returned {type(loss).__name__}, not its loss")
    return float(loss), bool(skipped)


def scaled_update(scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer) -> bool:
    """The optimizer step through a gradient scaler, after its gradients
    are unscaled (clipped or not); True where the scaler skipped it. A
    scaler lowers its scale exactly when it skips (inf or nan gradients);
    a disabled one (fp32, bf16) never skips and costs no device sync."""
    before = scaler.get_scale() if scaler.is_enabled() else None
    scaler.step(optimizer)
    scaler.update()
    return before is not None and scaler.get_scale() < before


@dataclass
class Numerics:
    """This rank's account of its losses and skipped updates."""

    first_loss: float | None = None
    nonfinite: float | None = None
    nonfinite_at: int = 0  # 0: every loss finite
    skipped: int = 0
    # every iteration's loss (nan where this rank has none) and whether its update was skipped
    losses: list[float] = field(default_factory=list)
    has_loss: list[bool] = field(default_factory=list)
    skips: list[bool] = field(default_factory=list)

    def add(self, iteration: int, loss: float | None, skipped: bool, timed: bool) -> None:
        self.losses.append(math.nan if loss is None else loss)
        self.has_loss.append(loss is not None)
        self.skips.append(skipped)
        if loss is not None:
            if iteration == 1:
                self.first_loss = loss
            if not math.isfinite(loss) and not self.nonfinite_at:
                self.nonfinite, self.nonfinite_at = loss, iteration
        self.skipped += int(skipped and timed)

    def fields(self, dist: Dist) -> dict[str, object]:
        """The summary line's numerics fields, over all ranks (every rank calls this)."""
        ranks = dist.gather_floats([
            math.nan if self.first_loss is None else self.first_loss, float(self.first_loss is not None),
            math.nan if self.nonfinite is None else self.nonfinite, float(self.nonfinite_at),
            float(self.skipped)])
        firsts = [r[0] for r in ranks if r[1]]
        out: dict[str, object] = {"loss_first": sum(firsts) / len(firsts) if firsts else math.nan}
        bad = [(int(r[3]), r[2]) for r in ranks if r[3]]
        if bad:
            at, value = min(bad)
            out |= {"loss_nonfinite": value, "loss_nonfinite_at": at}
        return out | {"skipped_iterations": int(max(r[4] for r in ranks))}

    def series(self, dist: Dist) -> dict[str, list]:
        """Every iteration's loss, the mean over the ranks that have one
        (None where none has), and each rank's skipped updates, iteration by
        iteration (every rank calls this: the ranks run the same iterations)."""
        n = len(self.losses)
        ranks = dist.gather_floats([*self.losses, *map(float, self.has_loss), *map(float, self.skips)])
        losses = []
        for i in range(n):
            found = [r[i] for r in ranks if r[n + i]]
            losses.append(sum(found) / len(found) if found else None)
        return {"losses": losses, "skipped_by_rank": [[bool(x) for x in r[2 * n:]] for r in ranks]}
