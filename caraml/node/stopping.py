"""When a training run stops: after an iteration count, after a wall-clock
budget (like Megatron's --exit-duration-in-mins), or when Slurm (or a user)
sends SIGTERM, SIGINT, SIGUSR1 or SIGUSR2. Whatever the reason, the driver
leaves its loop normally, so its summary and energy files are still written.

A measurement window (min_timed_iterations, min_timed_seconds) makes the
iteration count a floor: the run goes on past it until it has timed at
least so many iterations lasting at least so long together, the length a
row needs to be a measurement (the row model's verdict), however fast the
device.

Every rank reaches the counts after the same iteration (count_reached); a
signal, the budget and a window's seconds may come to one rank first, so
the ranks agree on those (the driver's stop vote)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from caraml.node.timing import Timed
from caraml.report import WINDOW_REACHED

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)


@dataclass
class StopCondition:
    max_iterations: int | None = None
    max_seconds: float | None = None
    min_timed_iterations: int | None = None
    min_timed_seconds: float | None = None
    clock: Callable[[], float] = time.monotonic
    signal_received: str | None = None
    _t0: float = field(default_factory=time.monotonic)
    _previous: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_iterations is not None and self.max_iterations <= 0:
            raise ValueError(f"iteration count must be positive, got {self.max_iterations}")
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ValueError(f"wall-clock budget must be positive, got {self.max_seconds}")
        for name in ("min_timed_iterations", "min_timed_seconds"):
            if getattr(self, name) is not None and getattr(self, name) <= 0:
                raise ValueError(f"{name.replace('_', ' ')} must be positive, got {getattr(self, name)}")
        self._t0 = self.clock()

    def install_signal_handlers(self) -> None:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._on_signal)

    def restore_signal_handlers(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signal_received = signal.Signals(signum).name

    @property
    def windowed(self) -> bool:
        return self.min_timed_iterations is not None or self.min_timed_seconds is not None

    def _window_open(self, timed: Timed) -> bool:
        """Whether the timed iterations so far fall short of the window."""
        return (timed.iterations < (self.min_timed_iterations or 0)
                or timed.seconds < (self.min_timed_seconds or 0.0))

    def _iterations_reached(self, iterations_done: int) -> bool:
        return self.max_iterations is not None and iterations_done >= self.max_iterations

    def count_reached(self, iterations_done: int, timed: Timed = Timed()) -> bool:
        """Whether the run stops on counts alone, which every rank reaches
        after the same iteration: the iteration count and a window's timed
        iterations. A window's seconds are each rank's own clock's, so a
        window with seconds never closes here: the ranks must agree on it."""
        return (self._iterations_reached(iterations_done) and self.min_timed_seconds is None
                and timed.iterations >= (self.min_timed_iterations or 0))

    def reason(self, iterations_done: int, timed: Timed = Timed()) -> str | None:
        """Why the run should stop now, or None to go on; timed: the
        iterations timed so far."""
        if self.signal_received:
            return f"signal {self.signal_received}"
        if self._iterations_reached(iterations_done) and not (self.windowed and self._window_open(timed)):
            if self.windowed:
                return (f"{WINDOW_REACHED}: at least {self.min_timed_iterations or 0} timed iterations "
                        f"lasting {self.min_timed_seconds or 0:g} s")
            return f"iteration count {self.max_iterations} reached"
        if self.max_seconds is not None and self.clock() - self._t0 >= self.max_seconds:
            return f"wall-clock budget {self.max_seconds:g} s reached"
        return None

    def __enter__(self) -> StopCondition:
        self.install_signal_handlers()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore_signal_handlers()
