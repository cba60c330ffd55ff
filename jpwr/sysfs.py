"""Reading the kernel's sysfs and procfs. The roots come from JPWR_SYSFS_ROOT
and JPWR_PROCFS_ROOT (defaults /sys and /proc) so a fake tree in a temporary
directory can stand in for a node's sensors."""

from __future__ import annotations

import os
import re
from pathlib import Path

from jpwr.method import Channel, Method, MethodUnavailable
from jpwr.notice import one_line, say


def sysfs_root() -> Path:
    return Path(os.environ.get("JPWR_SYSFS_ROOT") or "/sys")


def procfs_root() -> Path:
    return Path(os.environ.get("JPWR_PROCFS_ROOT") or "/proc")


def read_text(path: Path) -> str:
    # Opened afresh on every read: sysfs regenerates a value only on a new
    # read from offset 0, and a removed device then fails with an OSError.
    with open(path) as f:
        return f.read().strip()


def read_int(path: Path) -> int:
    return int(read_text(path))


def natural_key(path: Path) -> list:
    """hwmon10 after hwmon9, intel-rapl:0:10 after intel-rapl:0:2."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def hwmon_root() -> Path:
    return sysfs_root() / "class" / "hwmon"


def hwmon_dirs() -> list[Path]:
    return sorted(hwmon_root().glob("hwmon*"), key=natural_key)


def hwmon_attribute(hwmon: Path, name: str) -> Path | None:
    """Drivers put attributes in the hwmon directory or, as the ACPI power
    meter does, in the device directory it links to."""
    for where in (hwmon, hwmon / "device"):
        if (where / name).is_file():
            return where / name
    return None


class SysfsPowerMethod(Method):
    """A method whose channels are sysfs files holding power in microwatts."""

    def __init__(self, sensors: list[tuple[Channel, Path]], missing: str) -> None:
        super().__init__()
        readable = []
        for channel, path in sensors:
            try:
                read_int(path)
            except (OSError, ValueError) as err:
                say(f"{self.name}: skipping {path} ({one_line(err)})")
                continue
            readable.append((channel, path))
        if not readable:
            raise MethodUnavailable(f"{self.name}: {missing}")
        self.channels = [channel for channel, _ in readable]
        self._paths = [path for _, path in readable]

    def read(self) -> list[float]:
        return [self._value(i, lambda: read_int(path) * 1e-6)
                for i, path in enumerate(self._paths)]
