"""When a training run stops: after an iteration count, after a wall-clock
budget (like Megatron's --exit-duration-in-mins), or when Slurm (or a user)
sends SIGTERM, SIGINT, SIGUSR1 or SIGUSR2. Whatever the reason, the driver
leaves its loop normally, so its summary and energy files are still written."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)


@dataclass
class StopCondition:
    max_iterations: int | None = None
    max_seconds: float | None = None
    clock: Callable[[], float] = time.monotonic
    signal_received: str | None = None
    _t0: float = field(default_factory=time.monotonic)
    _previous: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_iterations is not None and self.max_iterations <= 0:
            raise ValueError(f"iteration count must be positive, got {self.max_iterations}")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ValueError(f"wall-clock budget must be positive, got {self.max_seconds}")
        self._t0 = self.clock()

    def install_signal_handlers(self) -> None:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def restore_signal_handlers(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _on_signal(self, signum, _frame) -> None:
        self.signal_received = signal.Signals(signum).name

    def count_reached(self, iterations_done: int) -> bool:
        """The iteration count, which every rank reaches after the same iteration"""
        return self.max_iterations is not None and iterations_done >= self.max_iterations

    def reason(self, iterations_done: int) -> str | None:
        """Why the run should stop now, or None to go on."""
        if self.signal_received:
            return f"signal {self.signal_received}"
        if self.count_reached(iterations_done):
            return f"iteration count {self.max_iterations} reached"
        if self.max_seconds is not None and self.clock() - self._t0 >= self.max_seconds:
            return f"wall-clock budget {self.max_seconds:g} s reached"
        return None

    def __enter__(self) -> StopCondition:
        self.install_signal_handlers()
        return self

    def __exit__(self, *exc) -> None:
        self.restore_signal_handlers()
