"""How the comparison writes a number for people: three significant digits
with thousands separators (47,500 tokens/s, 0.346), a count as it is
(batch 1024, never rounded), a time in s, min or h
and an energy in Wh, kWh or MWh, the unit chosen per value so that no value
is ever printed in milli-hours or milli-kWh."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import SupportsFloat

NA = "n/a"
SIGNIFICANT = 3
# (largest value in the unit, unit, size of the unit in the base unit)
_TIME = ((120.0, "s", 1.0), (120 * 60.0, "min", 60.0), (math.inf, "h", 3600.0))
_ENERGY = ((1e3, "Wh", 1.0), (1e6, "kWh", 1e3), (math.inf, "MWh", 1e6))


def numeric(value: object) -> float | None:
    """A cell's value as a number; None where it holds none (None, NaN,
    pandas' NA); ValueError for a text that is no number."""
    if not isinstance(value, (SupportsFloat, str)):
        return None
    number = float(value)
    return None if math.isnan(number) else number


def number(given: object, unit: str = "") -> str:
    """value to three significant digits, thousands separated, with its unit."""
    value = numeric(given)
    if value is None:
        return NA
    if value == 0 or math.isinf(value):
        text = f"{value:g}"
    else:
        decimals = SIGNIFICANT - 1 - math.floor(math.log10(abs(value)))
        rounded = round(value, decimals)
        # rounding may carry into the next power of ten (999.6 -> 1,000)
        decimals = SIGNIFICANT - 1 - math.floor(math.log10(abs(rounded)))
        text = f"{round(rounded, decimals):,.{max(decimals, 0)}f}"
    return f"{text} {unit}".rstrip()


def count(given: object) -> str:
    """A count (batch size, nodes, devices, runs) as it is, never rounded: 1024, not 1,020."""
    value = numeric(given)
    if value is None:
        return NA
    return f"{int(value)}" if value.is_integer() else f"{value:g}"


def _scaled(given: object, steps: Sequence[tuple[float, str, float]]) -> str:
    value = numeric(given)
    if value is None:
        return NA
    for limit, unit, size in steps:
        if abs(value) < limit:
            return number(value / size, unit)
    raise AssertionError("the last step has no limit")


def duration(seconds: object) -> str:
    """A time in s below 2 min, in min below 2 h, else in h."""
    return _scaled(seconds, _TIME)


def energy(wh: object) -> str:
    """An energy in Wh below 1 kWh, in kWh below 1 MWh, else in MWh."""
    return _scaled(wh, _ENERGY)
