"""HPE Cray pm_counters folders for the tests, in the format a node's power
management controller gives them under /sys/cray/pm_counters (HPE's "User
Access to Compute Node Power Data"; version 3 as on HPE Cray EX): each
telemetry file `<value> <unit> <timestamp> us` (energy in J, power in W,
the timestamp in microseconds), and freshness, generation, startup, version
and raw_scan_hz one integer each. Files are replaced whole, so a reader
never sees one half-written. Used as jpwr's fake sysfs tree and as the test
cluster's nodes' counters (tests/slurm_cluster.py)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def write_file(directory: Path, name: str, text: str) -> None:
    temporary = directory / f".{name}.new"
    temporary.write_text(text + "\n")
    os.replace(temporary, directory / name)


class PmCounterFolder:
    """One node's folder. write() sets every counter at once, the way the
    controller updates them: the telemetry first, freshness last."""

    def __init__(self, directory: Path, version: int = 3, raw_scan_hz: int = 10,
                 startup: int = 1_700_000_000_000_000, generation: int = 1) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.version = version
        self.raw_scan_hz = raw_scan_hz
        self.startup = startup
        self.generation = generation
        self.freshness = 0

    def write(self, energy_j: dict[str, int], power_w: dict[str, int] | None = None,
              timestamp_us: int | None = None) -> None:
        """energy_j and power_w by counter name: "" is the node's own (the
        files energy and power), else "cpu", "memory", "accel0", ..."""
        stamp = f" {timestamp_us} us" if timestamp_us is not None else ""
        for name, joules in energy_j.items():
            write_file(self.directory, f"{name}_energy" if name else "energy", f"{joules} J{stamp}")
        for name, watts in (power_w or {}).items():
            write_file(self.directory, f"{name}_power" if name else "power", f"{watts} W{stamp}")
        for name, value in (("version", self.version), ("raw_scan_hz", self.raw_scan_hz),
                            ("startup", self.startup), ("generation", self.generation)):
            write_file(self.directory, name, str(value))
        self.freshness += 1
        write_file(self.directory, "freshness", str(self.freshness))


class DrivenCounters:
    """A node whose counters rise at a known power, updated raw_scan_hz
    times a second by a thread (as the controller does): the node draws
    `watts`, of which the shares in `parts` ({"cpu": 0.5, ...}) are the
    parts' own counters. Energy is whole joules from `start_j` on."""

    def __init__(self, folder: PmCounterFolder, watts: float, parts: dict[str, float],
                 start_j: int = 5_000_000) -> None:
        self.folder = folder
        self.watts = watts
        self.parts = {"": 1.0, **parts}
        self.start_j = start_j
        self._t0 = time.time()
        self._last = self._t0
        self.max_gap_s = 0.0  # the longest a reading stood still: the counters' resolution in time
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pm-counters", daemon=True)
        self.update()  # the files exist before anything reads them

    def update(self) -> None:
        now = time.time()
        self.max_gap_s, self._last = max(self.max_gap_s, now - self._last), now
        joules = self.watts * (now - self._t0)
        self.folder.write({name: self.start_j + int(share * joules) for name, share in self.parts.items()},
                          {name: round(share * self.watts) for name, share in self.parts.items()},
                          timestamp_us=int(now * 1e6))

    def _run(self) -> None:
        while not self._stop.wait(1 / self.folder.raw_scan_hz):
            self.update()

    def start(self) -> DrivenCounters:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
