"""What every power-reading method provides: a fixed list of channels, one
power reading per channel per sample, and optionally a hardware energy
counter. Vendor modules and sysfs readers build on this."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from jpwr.notice import one_line, say

MEASURED = "measured"
ESTIMATED = "estimated"


class MethodUnavailable(RuntimeError):
    """The library or the device a method needs is missing. The message is one
    line that starts with the method name and names what is missing."""


@dataclass(frozen=True)
class Channel:
    """One power reading of a method: a GPU, a RAPL zone, a hwmon sensor."""

    device: str
    source: str = MEASURED
    info: str = ""
    # The scope of the hardware counter where it differs from the power
    # reading's (GH200: NVML's counter is the module's, its power the GPU's);
    # such a counter is reported beside the figure, never as it.
    counter_scope: str = ""


def import_binding(module: str, method: str, install_hint: str) -> ModuleType:
    # Vendor bindings are optional extras, so a missing one is an ordinary
    # "not available here", never a traceback.
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MethodUnavailable(
            f"{method}: Python module '{module}' is not installed ({install_hint})") from err


class Method:
    """Base of all methods. Subclasses set `name` and `channels` in their
    constructor, which raises MethodUnavailable when they cannot work here."""

    name = ""

    def __init__(self) -> None:
        self.channels: list[Channel] = []
        self._warned: set[int] = set()

    def start(self) -> None:
        """Called by the sampler right before it begins; counter-based methods
        take their reference reading here."""

    def read(self) -> list[float]:
        """Power in W for every channel, NaN where a channel did not answer."""
        raise NotImplementedError

    def energy_j(self) -> list[float] | None:
        """Hardware energy counters in J (any origin, never decreasing), one per
        channel and NaN where a channel has none; None for methods without."""
        return None

    def describe(self) -> dict:
        """Settings worth keeping next to the data (e.g. an estimate's model)."""
        return {}

    def close(self) -> None:
        """Releases the vendor library."""

    def _value(self, index: int, read_one: Callable[[], float]) -> float:
        # Bindings raise their own exception types when a device is lost, so
        # anything raised here means "no reading" for this channel only.
        # read_one is called here and now (a closure over a loop's variable
        # reads that iteration's).
        try:
            return float(read_one())
        except Exception as err:  # noqa: BLE001
            self._lost(index, err)
            return math.nan

    def _lost(self, index: int, err: BaseException) -> None:
        if index in self._warned:
            return
        self._warned.add(index)
        say(f"warning: {self.name} {self.channels[index].device} did not answer "
            f"({one_line(err)}); its samples are NaN while it does not answer")
