"""The raw evidence of a row's throughput and numerics, written by rank 0
beside provenance.json (the run's energy folder) as iterations.json: every
timed iteration's time on every rank and the slowest rank's per iteration
(what the summary line's figures are made from, caraml/node/timing.py),
every iteration's loss and each rank's skipped updates
(caraml/node/numerics.py), the iterations run before the timed ones, and
what one iteration does: its work in the benchmark's unit and the model
and batch it was counted for. From these a row's throughput, MFU and
numerics are made again and checked (caraml/audit); nothing here is a
figure of its own."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from caraml.node.files import write_whole

FILE_NAME = "iterations.json"
FORMAT = "caraml-iterations-1"


def _number(value: float | None) -> float | str | None:
    """A loss as JSON holds it: a number, null where no rank had one, and
    the words nan, inf, -inf (strict JSON has no such numbers)."""
    if value is None or math.isfinite(value):
        return value
    return str(value)


def record(folder: str | Path, *, by_rank: Sequence[Sequence[float]], slowest: Sequence[float],
           iterations_total: int, losses: Sequence[float | None],
           skipped_by_rank: Sequence[Sequence[bool]], work: Mapping[str, object]) -> Path:
    """Writes iterations.json into folder; by_rank: each rank's timed
    iterations' seconds, slowest: the job's (each the slowest rank's);
    losses and skipped_by_rank: every iteration, warm-up included; work:
    what one iteration does (work_per_iteration, unit, and the model it
    was counted for where the benchmark counts FLOPs)."""
    path = Path(folder) / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    # whole or not at all: a half-written file would read as evidence that contradicts the row
    write_whole(path, json.dumps({
        "format": FORMAT, "iterations_total": iterations_total,
        "warmup_iterations": iterations_total - len(slowest),
        "timed_s": list(slowest), "timed_s_by_rank": [list(times) for times in by_rank],
        "losses": [_number(loss) for loss in losses],
        "skipped_by_rank": [[int(s) for s in skips] for skips in skipped_by_rank],
        **work}).encode() + b"\n")
    return path


def loss(value: float | str | None) -> float | None:
    """A loss as record wrote it, as a number (None where no rank had one)."""
    return None if value is None else float(value)  # float("nan") reads the words back
