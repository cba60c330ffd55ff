"""A side of the time-sliced as-run comparison (aux/perf/as_run.py), in
its own process: it gives up its turn between two iterations, never inside
one, by stopping its own process group (SIGSTOP) at the first iteration
boundary once its turn has lasted `AS_RUN_TURN_S` seconds; the comparison
continues it (SIGCONT) for its next turn. Its first boundary, before the
first warm-up iteration, ends its set-up: there it waits until the other
side is ready too. At its end it prints every timed iteration's span on
the monotonic clock, which the comparison holds against the pauses it
forced on a side that overran its turn.

Started as `python aux/perf/turns.py -m MODULE ARGS`, it runs a driver as
`python -m MODULE ARGS` runs it, its IterationTimer (caraml/node/timing.py)
giving up the turn as each iteration starts; the plain loop calls the
same Turns itself (as_run.time_plain). Standard library only: it runs in
the side's process before anything else."""

from __future__ import annotations

import atexit
import importlib
import json
import os
import runpy
import signal
import sys
import time
from collections.abc import Callable

TURN_ENV = "AS_RUN_TURN_S"
TURNS_LINE = "as-run turns:"


class Turns:
    """A side's turns (turn_s None: it has none, its runs whole) and its
    timed iterations' spans"""

    def __init__(self, turn_s: float | None) -> None:
        self.turn_s = turn_s
        self._began: float | None = None  # its turn's start; None before its first
        self.yields = 0
        self.spans: list[tuple[float, float]] = []

    @classmethod
    def from_env(cls) -> Turns:
        value = os.environ.get(TURN_ENV)
        return cls(float(value) if value else None)

    def boundary(self) -> None:
        """Between two iterations: gives up the turn where it is over"""
        if self.turn_s is None:
            return
        if self._began is None or time.monotonic() - self._began >= self.turn_s:
            os.killpg(0, signal.SIGSTOP)  # returns when the comparison continues it
            self._began = time.monotonic()
            self.yields += 1

    def timed(self, begun: float, ended: float) -> None:
        """A timed iteration's span on the monotonic clock"""
        self.spans.append((begun, ended))

    def line(self) -> str:
        return TURNS_LINE + json.dumps({"yields": self.yields, "spans": self.spans})

    def report(self) -> None:
        print(self.line(), flush=True)


def timed_by_turns(timer: type, turns: Turns) -> None:
    """The driver's IterationTimer, giving up the turn as an iteration
    starts and keeping each timed iteration's span"""
    start: Callable = timer.start
    stop: Callable = timer.stop

    def starting(self) -> None:
        turns.boundary()
        self._as_run_begun = time.monotonic()
        start(self)

    def stopping(self) -> float:
        elapsed = stop(self)
        if self.seen > self.warmup:
            turns.timed(self._as_run_begun, time.monotonic())
        return elapsed

    timer.start, timer.stop = starting, stopping


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "-m":
        raise SystemExit("usage: turns.py -m MODULE [ARGS ...]")
    module = argv[1]
    sys.path[0] = os.getcwd()  # as `python -m` has it: the driver's tree is where it starts
    turns = Turns.from_env()
    timed_by_turns(importlib.import_module("caraml.node.timing").IterationTimer, turns)
    atexit.register(turns.report)
    sys.argv = [module, *argv[2:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
