"""What the driver core's loop (caraml/node/driver.py) needs of a backend: one
training iteration over the micro-batches of one global batch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


class Backend(Protocol):
    name: str
    attention: str
    data_parallel_rank: int

    def train_step(self, batches: Iterator[dict]) -> float | None:
        """One iteration; this rank's mean loss, or None where it has no loss
        (pipeline stages before the last)."""
