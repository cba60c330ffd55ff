"""NVIDIA Grace-Hopper superchip power from the ACPI power meters in hwmon.
Each meter names its rail in power1_oem_info, e.g. "Module Power Socket 0";
power1_average holds microwatts. The module rail covers the whole superchip
(Hopper GPU included), Grace covers CPU and its memory, CPU the cores only,
SysIO the I/O die."""

from __future__ import annotations

import re

from jpwr.method import Channel
from jpwr.sysfs import (
    SysfsPowerMethod,
    hwmon_attribute,
    hwmon_dirs,
    hwmon_root,
    read_text,
)

RAILS = ("module", "grace", "cpu", "sysio")
_OEM_INFO = re.compile(r"(Module|Grace|CPU|SysIO) Power Socket (\d+)", re.IGNORECASE)


class GraceHopperPower(SysfsPowerMethod):
    name = "gh"

    def __init__(self) -> None:
        found = []
        for hwmon in hwmon_dirs():
            info_path = hwmon_attribute(hwmon, "power1_oem_info")
            power_path = hwmon_attribute(hwmon, "power1_average")
            if info_path is None or power_path is None:
                continue
            try:
                match = _OEM_INFO.fullmatch(read_text(info_path))
            except OSError:
                continue
            if match is None:
                continue
            rail, socket = match.group(1).lower(), int(match.group(2))
            found.append(((socket, RAILS.index(rail)),
                          Channel(f"{rail}-{socket}", info=str(power_path)), power_path))
        found.sort(key=lambda item: item[0])
        super().__init__([(channel, path) for _, channel, path in found],
                         "no Grace-Hopper power meter (hwmon power1_oem_info "
                         f"'Module Power Socket N') found under {hwmon_root()}")


power = GraceHopperPower  # the upstream name
