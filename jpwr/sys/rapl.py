"""Linux powercap RAPL zones (intel-rapl:*, also used by AMD CPUs): package,
core, uncore, dram, psys. energy_uj is a counter that wraps at
max_energy_range_uj; power is the counter's increase over the time since the
previous sample. intel-rapl-mmio:* zones repeat the package zone through
another interface and are left out so that nothing is read twice."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

from jpwr.method import Channel, Method, MethodUnavailable
from jpwr.notice import one_line
from jpwr.sysfs import natural_key, read_int, read_text, sysfs_root


class RaplZone:
    """One energy counter, turned into increments that survive wraparound."""

    def __init__(self, energy_path: Path, max_range_uj: int) -> None:
        self.energy_path = energy_path
        self.max_range_uj = max_range_uj
        self.total_uj = 0
        self._last_uj: int | None = None
        self._last_t = 0.0
        # Windows read the counter from the application's thread while the
        # sampler advances it.
        self._lock = threading.Lock()

    def reset(self, now: float) -> None:
        self._last_uj = read_int(self.energy_path)
        self._last_t = now

    def live_total_uj(self) -> int:
        """The counter's increase so far, up to this moment."""
        with self._lock:
            if self._last_uj is None:
                return self.total_uj
            step = read_int(self.energy_path) - self._last_uj
            return self.total_uj + (step + self.max_range_uj if step < 0 else step)

    def advance(self, now: float) -> float:
        """Average power in W since the previous call (NaN on the first)."""
        with self._lock:
            return self._advance(now)

    def _advance(self, now: float) -> float:
        value = read_int(self.energy_path)
        if self._last_uj is None:
            self._last_uj, self._last_t = value, now
            return math.nan
        step = value - self._last_uj
        if step < 0:
            step += self.max_range_uj
        watts = step * 1e-6 / (now - self._last_t)
        self.total_uj += step
        self._last_uj, self._last_t = value, now
        return watts


def _zone_name(zone: Path) -> str:
    """package-0, package-0/core, package-0/dram, psys, ..."""
    name = read_text(zone / "name")
    parent = zone.parent / zone.name.rsplit(":", 1)[0]
    if zone.name.count(":") > 1 and (parent / "name").is_file():
        return f"{read_text(parent / 'name')}/{name}"
    return name


class RaplPower(Method):
    name = "rapl"

    def __init__(self) -> None:
        super().__init__()
        root = sysfs_root() / "class" / "powercap"
        zones = sorted((z for z in root.glob("intel-rapl:*") if (z / "energy_uj").is_file()),
                       key=natural_key)
        if not zones:
            raise MethodUnavailable(f"rapl: no powercap zone with energy_uj under {root}")
        self._zones = []
        for zone in zones:
            try:
                counter = RaplZone(zone / "energy_uj", read_int(zone / "max_energy_range_uj"))
                read_int(counter.energy_path)
                label = _zone_name(zone)
            except (OSError, ValueError) as err:
                # energy_uj is readable by root only since Linux 5.10
                # (CVE-2020-8694); all zones fail the same way then.
                raise MethodUnavailable(f"rapl: cannot read {zone} ({one_line(err)})") from err
            self._zones.append(counter)
            self.channels.append(Channel(label, info=str(zone)))

    def start(self) -> None:
        now = time.monotonic()
        for i, zone in enumerate(self._zones):
            try:
                zone.reset(now)
            except (OSError, ValueError) as err:
                self._lost(i, err)

    def read(self) -> list[float]:
        now = time.monotonic()
        return [self._value(i, lambda: zone.advance(now)) for i, zone in enumerate(self._zones)]

    def energy_j(self) -> list[float]:
        return [self._value(i, lambda: zone.live_total_uj() * 1e-6)
                for i, zone in enumerate(self._zones)]


power = RaplPower
