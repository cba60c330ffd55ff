"""HPE Cray power management counters (pm_counters): the folder
<sysfs>/cray/pm_counters that HPE Cray EX nodes (and Cray XC before them)
have, after HPE's "User Access to Compute Node Power Data". The blade's
controller measures the node out of band and updates the files raw_scan_hz
times a second (10 Hz):

  energy, power                      the whole node (accelerators included)
  cpu_energy, cpu_power              the CPU domain
  memory_energy, memory_power        the memory domain
  accel<N>_energy, accel<N>_power    each accelerator (accel_energy: all of them)

Energy is accumulated joules, power point-in-time watts; each such file
holds "<value> <unit> <timestamp> us" (before version 3 "<value> <unit>").
A channel is a pair <name>_energy and <name>_power: the power file gives
the samples, the energy counter the figure (counter first, jpwr.energy).
Where numbered files of a kind exist (accel0_energy, ...), the unnumbered
one of that kind is their total and is left out, so nothing is read twice.

Each file is read on its own, and the controller may update between two of
them. `freshness` advances with every update, so a set of readings is one
update's where freshness is the same before and after it (else it is read
again). A freshness that stops advancing means the controller no longer
updates the files: the samples are NaN until it moves again. `startup`
changes when the controller restarts, and its counters start again with it,
so after a restart no counter difference covers the run and the integral
is the figure. `generation` advances with every change of the node's power
cap, which changes the conditions of the run: it is said and kept in the
method's settings."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from jpwr.method import Channel, Method, MethodUnavailable
from jpwr.notice import one_line, say
from jpwr.sysfs import natural_key, read_text, sysfs_root

_ENERGY = re.compile(r"(?:(cpu|memory|accel)(\d*)_)?energy")
# a set of readings is taken again at most this often while the controller
# updates in between (at 10 Hz, a set of a dozen files takes well under 1 ms)
TRIES = 5
# updates the controller may miss, and seconds at least, before its files
# count as stale
STALE_UPDATES = 20
STALE_S = 2.0


def parse(text: str, unit: str) -> tuple[int, int | None]:
    """(value, timestamp in µs or None) of "<value> <unit> [<timestamp> us]";
    a file in another unit is refused, naming it."""
    fields = text.split()
    if not fields:
        raise ValueError("the file is empty")
    if len(fields) > 1 and fields[1] != unit:
        raise ValueError(f"its unit is {fields[1]!r}, not {unit!r}")
    stamp = int(fields[2]) if len(fields) >= 4 and fields[3] == "us" else None
    return int(fields[0]), stamp


def counter_files(root: Path) -> list[tuple[str, Path, Path]]:
    """(device, energy file, power file) of every channel: node first, then
    cpu, memory and accelerators, numbered ones in their order."""
    found = {}
    for path in root.glob("*energy"):
        match = _ENERGY.fullmatch(path.name)
        if match:
            found[(match.group(1) or "", match.group(2) or "")] = path
    numbered = {kind for kind, number in found if number}
    order = ["", "cpu", "memory", "accel"]
    channels = []
    for (kind, number), energy in sorted(found.items(),
                                         key=lambda item: (order.index(item[0][0]),
                                                           natural_key(item[1]))):
        if kind in numbered and not number:
            continue  # the total of the numbered ones
        device = f"{kind}{number}" or "node"
        channels.append((device, energy, energy.with_name(energy.name.replace("energy", "power"))))
    return channels


class PmCountersPower(Method):
    name = "pm_counters"

    def __init__(self) -> None:
        super().__init__()
        self.root = sysfs_root() / "cray" / "pm_counters"
        if not self.root.is_dir():
            raise MethodUnavailable(f"pm_counters: no HPE Cray power management counters "
                                    f"({self.root} does not exist)")
        self._paths: list[tuple[Path, Path]] = []
        for device, energy, power in counter_files(self.root):
            try:
                parse(read_text(energy), "J")
                parse(read_text(power), "W")
            except (OSError, ValueError) as err:
                say(f"{self.name}: skipping {device} ({energy.name}, {power.name}: {one_line(err)})")
                continue
            self._paths.append((energy, power))
            self.channels.append(Channel(device, info=str(energy)))
        if not self._paths:
            raise MethodUnavailable(f"pm_counters: no readable <name>_energy and <name>_power "
                                    f"pair in {self.root}")
        self._lock = threading.Lock()
        self.version = self._setting("version")
        self.raw_scan_hz = self._setting("raw_scan_hz")
        self.startup = self._setting("startup")
        self._generations = [self._setting("generation")]
        self.restarted = False
        self.unsteady_sets = 0
        self._freshness: tuple[int | None, float] = (None, time.monotonic())

    def _setting(self, name: str) -> int | None:
        """One of the bookkeeping counters; None where this version has none."""
        try:
            return int(read_text(self.root / name).split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _snapshot(self) -> list[tuple[float, float] | Exception]:
        """One update's readings: per channel (joules, watts) or the error
        that channel's files gave."""
        for _ in range(TRIES):
            before = self._setting("freshness")
            readings: list[tuple[float, float] | Exception] = []
            for energy, power in self._paths:
                try:
                    readings.append((parse(read_text(energy), "J")[0], parse(read_text(power), "W")[0]))
                except (OSError, ValueError) as err:
                    readings.append(err)
            startup, generation = self._setting("startup"), self._setting("generation")
            after = self._setting("freshness")
            if before == after:
                break
        # where the controller updated during every try, each reading is
        # still its file's own; only the channels may come from two updates
        self._check(after, startup, generation, steady=before == after)
        return readings

    def _check(self, freshness: int | None, startup: int | None, generation: int | None,
               steady: bool) -> None:
        with self._lock:
            self.unsteady_sets += not steady
            if startup != self.startup and not self.restarted:
                self.restarted = True
                say(f"warning: {self.name}: the node's power management controller restarted "
                    f"(startup {self.startup} -> {startup}) and its energy counters with it; "
                    "the figure is the integrated power")
            if generation != self._generations[-1]:
                self._generations.append(generation)
                say(f"warning: {self.name}: the node's power cap changed during the run "
                    f"(generation {self._generations[-2]} -> {generation})")
            now = time.monotonic()
            if freshness is None or freshness != self._freshness[0]:
                self._freshness = (freshness, now)
            elif now - self._freshness[1] > self._stale_s():
                raise OSError(f"the counters have not been updated for "
                              f"{now - self._freshness[1]:.1f} s (freshness stays at {freshness})")

    def _stale_s(self) -> float:
        return max(STALE_S, STALE_UPDATES / (self.raw_scan_hz or 10))

    def _answers(self, pick: Callable[[tuple[float, float]], float]) -> list[float]:
        try:
            readings = self._snapshot()
        except OSError as err:
            readings = [err] * len(self.channels)

        def value(i: int) -> float:
            reading = readings[i]
            if isinstance(reading, Exception):
                raise reading
            return pick(reading)
        return [self._value(i, lambda: value(i)) for i in range(len(self.channels))]

    def read(self) -> list[float]:
        return self._answers(lambda reading: reading[1])

    def energy_j(self) -> list[float]:
        joules = self._answers(lambda reading: reading[0])
        # counters from before a restart and after it have no difference
        return [math.nan] * len(joules) if self.restarted else joules

    def describe(self) -> dict:
        return {"root": str(self.root), "version": self.version, "raw_scan_hz": self.raw_scan_hz,
                "startup": self.startup, "generations": list(self._generations),
                "restarted": self.restarted, "unsteady_sets": self.unsteady_sets}


power = PmCountersPower
