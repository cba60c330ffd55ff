"""The shapes of upstream jpwr's context manager (the tool the CARAML paper
describes), so that scripts written for it keep working: a wide power table
with a `timestamps` column and one column per device named
'<method>:<index>', and the counter energy as one row of Wh per device."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from jpwr.method import Channel, Method

TIMESTAMPS = "timestamps"

# gpu3 -> 3, ipu0 -> 0: upstream numbers accelerators by their index alone
_INDEXED = re.compile(r"(?:gpu|ipu)(\d+)")


def column_name(method: str, device: str) -> str:
    """'pynvml:0' for GPU 0 as upstream names it; other channels keep their
    device name ('gh:module-0', 'rapl:package-0')."""
    indexed = _INDEXED.fullmatch(device)
    return f"{method}:{indexed.group(1) if indexed else device}"


def columns_of(method: Method) -> list[str]:
    """Upstream's column name of each of the method's channels."""
    if isinstance(method, UpstreamMethod):
        return method.columns
    return [column_name(method.name, channel.device) for channel in method.channels]


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


def is_upstream_method(obj: object) -> bool:
    """An object written for upstream jpwr: init, measure and finalize on a
    dict of lists (e.g. a site's own reader)."""
    return all(callable(getattr(obj, name, None)) for name in ("init", "measure", "finalize"))


class UpstreamMethod(Method):
    """Runs an upstream-style method object in jpwr's sampler. Its init adds
    one list per device to the dict ('<name>:<device>'); each sample calls
    measure, which appends to them; finalize's DataFrames join energy()'s
    additional tables. A measure that raises gives a NaN sample (and one
    warning), and the lists are cut back, as upstream does."""

    def __init__(self, obj: Any) -> None:
        super().__init__()
        self._obj = obj
        self._values: dict[str, list] = {TIMESTAMPS: []}
        obj.init(self._values)
        self._keys = [key for key in self._values if key != TIMESTAMPS]
        if not self._keys:
            raise ValueError(f"{type(obj).__name__}.init added no device to the power dict")
        self.name = self._keys[0].split(":", 1)[0]
        # '<name>:<device>' keys give their device; keys of other prefixes
        # stay whole, so that no two channels share a name
        prefix = f"{self.name}:"
        self.channels = [Channel(key[len(prefix):] if key.startswith(prefix) else key)
                         for key in self._keys]

    @property
    def columns(self) -> list[str]:
        """The keys its init chose, which name its columns as upstream's did."""
        return list(self._keys)

    def read(self) -> list[float]:
        before = len(self._values[TIMESTAMPS])
        try:
            self._obj.measure(self._values)
        except Exception:
            for key in self._keys:
                del self._values[key][before:]
            raise
        self._values[TIMESTAMPS].append(time.time())
        return [float(self._values[key][-1]) if len(self._values[key]) > before else math.nan
                for key in self._keys]

    def finalize(self) -> dict[str, pd.DataFrame]:
        return dict(self._obj.finalize(self._values) or {})
