"""The shapes of upstream jpwr's context manager (the tool the CARAML paper
describes), so that scripts written for it keep working: a wide power table
with a `timestamps` column and one column per device named
'<method>:<index>', and the counter energy as one row of Wh per device."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

TIMESTAMPS = "timestamps"

# gpu3 -> 3, ipu0 -> 0: upstream numbers accelerators by their index alone
_INDEXED = re.compile(r"(?:gpu|ipu)(\d+)")


def column_name(method: str, device: str) -> str:
    """'pynvml:0' for GPU 0 as upstream names it; other channels keep their
    device name ('gh:module-0', 'rapl:package-0')."""
    indexed = _INDEXED.fullmatch(device)
    return f"{method}:{indexed.group(1) if indexed else device}"


def wide_frame(columns: Sequence[str], times: Sequence[float], rows: Sequence) -> pd.DataFrame:
    """Upstream's `scope.df`: one row per sample, NaN where a device did not
    answer."""
    watts = np.array(rows, dtype=float).reshape(len(times), len(columns))
    frame = pd.DataFrame(watts, columns=list(columns))
    frame.insert(0, TIMESTAMPS, np.array(times, dtype=float))
    return frame


def counter_frame(counter_wh: dict[str, float]) -> pd.DataFrame:
    """Upstream's additional['energy_from_counter']: one row, one column of
    Wh per device."""
    return pd.DataFrame({name: [wh] for name, wh in counter_wh.items()})


@dataclass(frozen=True)
class UpstreamOptions:
    """get_power's `options` dict. `ignore_measure_errors` is accepted for
    upstream's scripts; jpwr always goes on after a failed reading (the
    sample is NaN, with one warning), so both values behave alike."""

    ignore_measure_errors: bool = False

    @classmethod
    def from_dict(cls, options: dict | None) -> UpstreamOptions:
        if options is None:
            return cls()
        if not isinstance(options, dict):
            raise ValueError(f"get_power's options must be a dict such as "
                             f"{{'ignore_measure_errors': True}}, got {options!r}")
        unknown = sorted(set(options) - {"ignore_measure_errors"})
        if unknown:
            raise ValueError(f"unknown get_power option(s) {', '.join(map(repr, unknown))}; "
                             f"the only one is 'ignore_measure_errors'")
        return cls(bool(options.get("ignore_measure_errors", False)))
