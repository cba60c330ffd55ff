"""The sampling thread. It reads every method at fixed deadlines
t0 + k * interval (so the work of one sample never delays the next ones),
hands new samples to a sink every flush_s seconds, and survives anything a
method or the disk does: a failing method gives NaN and one message."""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from jpwr.method import Method
from jpwr.notice import one_line, say

T = TypeVar("T")

# Counter-based methods (rapl, estimate) turn the difference between two
# readings into power; the first sample needs a reference taken a little
# earlier, or its interval would be too short to mean anything.
PRIME_S = 0.02

# How much nicer than the application the sampler thread runs (see
# _yield_to_the_application).
NICE_STEP = 10

Sink = Callable[[Sequence[float], Sequence[Sequence[float]]], None]


def _yield_to_the_application() -> None:
    """Lowers the calling thread's priority. On a node whose cores are all
    busy, a sampler woken at normal priority preempts the application and
    can cost it a whole time slice per sample (measured: -2 to -4 % training
    throughput on a 2-core machine at load 7). At lower priority it waits
    for the next free moment instead. Each sample is timestamped when it is
    read, so the energy stays right; only the spacing may stretch."""
    if not sys.platform.startswith("linux"):
        return  # elsewhere setpriority() cannot address a single thread
    try:
        thread = threading.get_native_id()
        nice = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, nice + NICE_STEP))
    except OSError:
        pass  # a sandbox may forbid it; sampling works the same


class Sampler:
    def __init__(self, methods: Sequence[Method], interval_s: float, flush_s: float,
                 sink: Sink | None = None) -> None:
        self.methods = list(methods)
        self.interval_s = interval_s
        self.flush_s = flush_s
        self.times: list[float] = []          # seconds since the epoch
        self.rows: list[list[float]] = []     # W, one value per channel
        self.counters_first: list[list[float] | None] = []
        self.counters_last: list[list[float] | None] = []
        self.cpu_s = math.nan                 # the thread's own CPU time
        self._sink = sink
        self._flushed = 0
        self._complained: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jpwr-sampler", daemon=True)

    def start(self) -> None:
        # The references (a counter-based method's first reading, the energy
        # counters) are read here, in the caller's thread, so that they mark
        # the measurement's start. Read by the sampler thread, which runs at
        # a lower priority, they marked whenever a busy node first let it
        # run: in a short run on busy cores, after the run had ended, and the
        # run then had no figure at all.
        for method in self.methods:
            self._guard(method.name, method.start)
        self.counters_first = self._counters()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        _yield_to_the_application()
        # Wall-clock times for the files (comparable across nodes), taken
        # from the monotonic clock so that a clock step cannot bend a run.
        to_wall = time.time() - time.monotonic()
        t0 = time.monotonic() + PRIME_S
        self._stop.wait(PRIME_S)
        k = 0
        last_flush = t0
        while True:
            self._sample(to_wall)
            now = time.monotonic()
            if now - last_flush >= self.flush_s:
                self._flush()
                last_flush = now
            # Deadlines missed while the machine was busy are skipped, not
            # made up in a burst.
            k = max(k + 1, math.floor((now - t0) / self.interval_s) + 1)
            if self._stop.wait(t0 + k * self.interval_s - time.monotonic()):
                break
        # One more sample closes the window at the stop, unless the last
        # one is so recent that a counter-based value would be mostly noise;
        # a run shorter than the priming delay still gets its two samples.
        if (len(self.times) < 2
                or time.monotonic() + to_wall - self.times[-1] >= self.interval_s / 2):
            self._sample(to_wall)
        self.counters_last = self._counters()
        self._flush()
        self.cpu_s = time.thread_time()

    def _sample(self, to_wall: float) -> None:
        t = time.monotonic()
        values: list[float] = []
        for method in self.methods:
            values.extend(self._read(method))
        self.rows.append(values)
        self.times.append(t + to_wall)  # after rows: a reader sizes by len(times)

    def _read(self, method: Method) -> list[float]:
        values = self._guard(method.name, method.read)
        if values is None or len(values) != len(method.channels):
            return [math.nan] * len(method.channels)
        return values

    def _counters(self) -> list[list[float] | None]:
        return [self._guard(method.name, method.energy_j) for method in self.methods]

    def _flush(self) -> None:
        if self._sink is None:
            return
        n = len(self.times)
        try:
            self._sink(self.times[self._flushed:n], self.rows[self._flushed:n])
            self._flushed = n
        except Exception as err:  # noqa: BLE001 - a full disk must not stop the sampling
            self._complain("flush", f"cannot append samples to disk ({one_line(err)}); "
                                    "they stay in memory and are tried again")

    def _guard(self, what: str, call: Callable[[], T]) -> T | None:
        # A method's own per-channel handling should catch device errors;
        # this catches everything else so that the thread never dies.
        try:
            return call()
        except Exception as err:  # noqa: BLE001
            self._complain(what, f"{what} failed ({one_line(err)}); its samples are NaN")
            return None

    def _complain(self, key: str, message: str) -> None:
        if key not in self._complained:
            self._complained.add(key)
            say(f"warning: {message}")
