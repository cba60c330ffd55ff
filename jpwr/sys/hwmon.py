"""Generic hwmon power sensors: every power<N>_input (microwatts) of every
hwmon chip. Channels are named <chip>/<hwmonX>/power<N>, with the sensor's
label kept as info. Sensors of one node may overlap (a PSU reading contains
the boards behind it); jpwr cannot tell, so the per-device table keeps them
apart and the counting rule (jpwr.counting) uses hwmon only as a fallback."""

from __future__ import annotations

import re
from pathlib import Path

from jpwr.method import Channel
from jpwr.sysfs import SysfsPowerMethod, hwmon_dirs, hwmon_root, natural_key, read_text

_INPUT = re.compile(r"power(\d+)_input")


def _optional_text(path: Path) -> str:
    try:
        return read_text(path)
    except OSError:
        return ""


class HwmonPower(SysfsPowerMethod):
    name = "hwmon"

    def __init__(self) -> None:
        sensors = []
        for hwmon in hwmon_dirs():
            chip = _optional_text(hwmon / "name") or "unnamed"
            for path in sorted(hwmon.glob("power*_input"), key=natural_key):
                number = _INPUT.fullmatch(path.name)
                if number is None:
                    continue
                label = _optional_text(hwmon / f"power{number.group(1)}_label")
                sensors.append((Channel(f"{chip}/{hwmon.name}/power{number.group(1)}",
                                        info=label), path))
        super().__init__(sensors, f"no power*_input sensor found under {hwmon_root()}")


power = HwmonPower
