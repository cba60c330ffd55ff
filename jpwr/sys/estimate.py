"""An estimate, not a measurement, for nodes without any power sensor: CPU
utilisation from /proc/stat times a linear per-CPU power model

    P = cpus * watts_per_cpu * (idle_fraction + (1 - idle_fraction) * utilisation)

cpus are the logical CPUs listed in /proc/stat (the whole node, like every
other jpwr method). The defaults, 3 W per logical CPU at full load and 30 %
of that at idle, sit in the middle of current server CPUs (TDP divided by
hardware threads: EPYC 7763 280 W/128 = 2.2 W, Xeon 8480+ 350 W/112 = 3.1 W,
Grace 72 cores ~3.5 W). Override them with JPWR_ESTIMATE_WATTS_PER_CPU and
JPWR_ESTIMATE_IDLE_FRACTION, or the constructor's arguments. Every channel
of this method carries source "estimated"."""

from __future__ import annotations

import math
import os
from pathlib import Path

from jpwr.method import ESTIMATED, Channel, Method, MethodUnavailable
from jpwr.notice import one_line
from jpwr.sysfs import procfs_root, read_text

DEFAULT_WATTS_PER_CPU = 3.0
DEFAULT_IDLE_FRACTION = 0.3


def cpu_times(first_line: str) -> tuple[int, int]:
    """(busy, total) ticks from the first, aggregate line of /proc/stat: busy
    is everything but idle and iowait; guest time is already inside user, so
    only the first 8 fields add up to the total."""
    fields = first_line.split()
    if not fields or fields[0] != "cpu":
        raise ValueError("first line is not the aggregate 'cpu' line")
    ticks = [int(x) for x in fields[1:9]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return sum(ticks) - idle, sum(ticks)


def count_cpus(stat_text: str) -> int:
    return sum(1 for line in stat_text.splitlines()
               if line.startswith("cpu") and line[3:4].isdigit())


def read_first_line(path: Path) -> str:
    # Only the aggregate line is needed, and on large nodes the rest of the
    # file (one line per CPU, the interrupt counts) is long.
    with open(path, "rb") as f:
        return f.readline().decode()


def _setting(given: float | None, env: str, default: float) -> float:
    if given is not None:
        return float(given)
    text = os.environ.get(env)
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{env}={text!r} is not a number") from None


class EstimatedPower(Method):
    name = "estimate"

    def __init__(self, watts_per_cpu: float | None = None,
                 idle_fraction: float | None = None) -> None:
        super().__init__()
        self.watts_per_cpu = _setting(watts_per_cpu, "JPWR_ESTIMATE_WATTS_PER_CPU",
                                      DEFAULT_WATTS_PER_CPU)
        self.idle_fraction = _setting(idle_fraction, "JPWR_ESTIMATE_IDLE_FRACTION",
                                      DEFAULT_IDLE_FRACTION)
        if not self.watts_per_cpu > 0:
            raise ValueError(f"estimate: watts per CPU must be positive, got {self.watts_per_cpu}")
        if not 0 <= self.idle_fraction <= 1:
            raise ValueError(f"estimate: idle fraction must be in [0, 1], got {self.idle_fraction}")
        self._stat = procfs_root() / "stat"
        try:
            self.cpus = count_cpus(read_text(self._stat))
            self._last = cpu_times(read_first_line(self._stat))
        except (OSError, ValueError, IndexError) as err:
            raise MethodUnavailable(f"estimate: cannot read CPU times from {self._stat} "
                                    f"({one_line(err)})") from err
        if self.cpus == 0:
            raise MethodUnavailable(f"estimate: {self._stat} lists no CPU")
        self._utilisation = math.nan
        self.channels = [Channel("cpus", ESTIMATED,
                                 info=f"{self.cpus} CPUs x {self.watts_per_cpu:g} W, "
                                      f"idle {self.idle_fraction:g}")]

    def start(self) -> None:
        try:
            self._last = cpu_times(read_first_line(self._stat))
        except (OSError, ValueError, IndexError) as err:
            self._lost(0, err)

    def read(self) -> list[float]:
        return [self._value(0, self._estimate)]

    def _estimate(self) -> float:
        busy, total = cpu_times(read_first_line(self._stat))
        # /proc/stat counts in ticks of 10 ms; between two close samples it
        # may not have moved, and the last utilisation still holds then.
        if total > self._last[1]:
            self._utilisation = (busy - self._last[0]) / (total - self._last[1])
        self._last = (busy, total)
        full = self.cpus * self.watts_per_cpu
        return full * (self.idle_fraction + (1 - self.idle_fraction) * self._utilisation)

    def describe(self) -> dict:
        return {"model": "cpus * watts_per_cpu * (idle_fraction + (1 - idle_fraction) "
                         "* utilisation)",
                "cpus": self.cpus, "watts_per_cpu": self.watts_per_cpu,
                "idle_fraction": self.idle_fraction, "stat": str(self._stat)}


power = EstimatedPower
