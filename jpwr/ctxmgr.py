"""Measuring power around a block of code:

    from jpwr.ctxmgr import get_power
    from jpwr.gpu.pynvml import power

    with get_power([power()], 100) as scope:
        train()
    energy_df, additional = scope.energy()

`scope.df` holds every sample (time, method, device, source, power_w);
`energy()` gives one row per channel with the trapezoid-integrated energy
and, per method with a hardware counter, the counter's figure next to it.
start() and stop() do the same without a `with` block."""

from __future__ import annotations

import datetime
import functools
import math
import os
import socket
import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from jpwr.counting import counted
from jpwr.energy import POWER_COLUMNS, energy_table
from jpwr.files import RunFiles, check_filetype
from jpwr.method import ESTIMATED, Method
from jpwr.notice import one_line, say
from jpwr.sampler import Sampler

# The environment that tells which rank of which job this is; kept in the
# meta file, and RANK (torchrun) or SLURM_PROCID (srun) become the rank.
JOB_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
                 "SLURM_JOB_ID", "SLURM_STEP_ID")


def rank_from_env() -> int | None:
    for variable in ("RANK", "SLURM_PROCID"):
        if os.environ.get(variable, "").isdigit():
            return int(os.environ[variable])
    return None


def _positive(value, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    return number


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat()


class PowerScope:
    def __init__(self, methods: Sequence[Method], interval_ms: float, *,
                 out_dir: str | os.PathLike | None = None, suffix: str = "",
                 filetype: str = "csv", flush_s: float = 2.0) -> None:
        self.methods = list(methods)
        if not self.methods or not all(isinstance(m, Method) for m in self.methods):
            raise ValueError("get_power needs a non-empty list of method objects, "
                             "e.g. [jpwr.gpu.pynvml.power()] or jpwr.methods.from_names(['auto'])")
        self.interval_ms = _positive(interval_ms, "interval (ms)")
        self.flush_s = _positive(flush_s, "flush interval (s)")
        check_filetype(filetype)
        self.host = socket.gethostname()
        self.rank = rank_from_env()
        self.files = RunFiles(out_dir, suffix, filetype) if out_dir is not None else None
        self.start_time: float | None = None
        self.end_time: float | None = None
        self._sampler: Sampler | None = None

    @property
    def channels(self) -> list[tuple[str, str, str]]:
        """(method, device, source) of every channel, in sample order."""
        return [(m.name, c.device, c.source) for m in self.methods for c in m.channels]

    def start(self) -> PowerScope:
        if self._sampler is not None:
            raise RuntimeError("this measurement was already started")
        sink = None
        if self.files is not None:
            sink = functools.partial(self.files.append_power, self.channels)
        self._sampler = Sampler(self.methods, self.interval_ms / 1000, self.flush_s, sink)
        self.start_time = time.time()
        if self.files is not None:
            self.files.write_meta(self._meta())
        self._sampler.start()
        return self

    def stop(self) -> None:
        if self._sampler is None or self.end_time is not None:
            return
        self._sampler.stop()
        self.end_time = time.time()
        if self.files is not None:
            self._write_results()

    def __enter__(self) -> PowerScope:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def _rank_value(self) -> float | int:
        # NaN rather than None: h5 files cannot hold nullable integer columns.
        return np.nan if self.rank is None else self.rank

    @property
    def sampler_cpu_s(self) -> float:
        """CPU time the sampling thread used (NaN until stopped)."""
        return self._sampler.cpu_s if self._sampler is not None else math.nan

    @property
    def df(self) -> pd.DataFrame:
        """Every sample so far, one row per sample and channel."""
        if self._sampler is None:
            return pd.DataFrame(columns=POWER_COLUMNS)
        n = len(self._sampler.times)
        channels = np.array(self.channels, dtype=object).reshape(-1, 3)
        watts = np.array(self._sampler.rows[:n], dtype=float).reshape(n, len(channels))
        return pd.DataFrame({
            "time": np.repeat(np.array(self._sampler.times[:n]), len(channels)),
            "method": np.tile(channels[:, 0], n),
            "device": np.tile(channels[:, 1], n),
            "source": np.tile(channels[:, 2], n),
            "power_w": watts.ravel(),
        }, columns=POWER_COLUMNS)

    def energy(self) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
        """(energy per channel, {method: counter vs integrated energy})."""
        table = energy_table(self.df)
        table.insert(0, "host", self.host)
        table.insert(1, "rank", self._rank_value)
        table.insert(5, "counted", counted(table))
        return table, self._additional(table)

    def _additional(self, table: pd.DataFrame) -> dict[str, pd.DataFrame]:
        sampler = self._sampler
        if sampler is None or not sampler.counters_last:
            return {}
        integrated = table.set_index(["method", "device"])["energy_wh"]
        result = {}
        for method, first, last in zip(self.methods, sampler.counters_first, sampler.counters_last):
            if first is None or last is None:
                continue
            rows = []
            for channel, before, after in zip(method.channels, first, last):
                counter_wh = (after - before) / 3600
                by_samples = integrated.get((method.name, channel.device), np.nan)
                rows.append({"host": self.host, "rank": self._rank_value, "method": method.name,
                             "device": channel.device, "source": channel.source,
                             "counter_wh": counter_wh, "integrated_wh": by_samples,
                             "difference_pct": 100 * (by_samples - counter_wh) / counter_wh
                             if counter_wh else np.nan})
            result[method.name] = pd.DataFrame(rows)
        return result

    def _write_results(self) -> None:
        files = self.files
        files.close_power()
        # The command has finished by now; failing to write must not turn
        # its success into a crash, but it must not go unnoticed either.
        try:
            energy, additional = self.energy()
            files.write_table(energy, "energy")
            for name, table in additional.items():
                files.write_table(table, f"additional_{name}")
            if files.filetype != "csv":
                files.write_table(self.df, "power")
            files.write_meta(self._meta())
        except Exception as err:  # noqa: BLE001 - disk, pandas and h5 errors alike
            say(f"error: could not write the results to {files.dir} ({one_line(err)}); "
                f"the samples are in {files.path('power', 'csv')}")

    def _meta(self) -> dict:
        finished = self.end_time is not None
        return {
            "format": "jpwr-run-1",
            "host": self.host,
            "pid": os.getpid(),
            "rank": self.rank,
            "env": {v: os.environ[v] for v in JOB_VARIABLES if v in os.environ},
            "methods": [m.name for m in self.methods],
            "method_settings": {m.name: m.describe() for m in self.methods if m.describe()},
            "channels": [{"method": m.name, "device": c.device, "source": c.source, "info": c.info}
                         for m in self.methods for c in m.channels],
            "estimated_channels": [f"{m}:{d}" for m, d, s in self.channels if s == ESTIMATED],
            "interval_ms": self.interval_ms,
            "flush_s": self.flush_s,
            "suffix": self.files.suffix if self.files else "",
            "filetype": self.files.filetype if self.files else None,
            "start_time": _iso(self.start_time),
            "end_time": _iso(self.end_time),
            "complete": finished,
            "samples": len(self._sampler.times) if finished else None,
        }


def get_power(methods: Sequence[Method], interval_ms: float, *,
              out_dir: str | os.PathLike | None = None, suffix: str = "",
              filetype: str = "csv", flush_s: float = 2.0) -> PowerScope:
    """Measures the given methods every interval_ms while the returned scope
    runs (as a context manager, or between start() and stop()). With out_dir,
    samples are appended to out_dir/power<suffix>.csv at most every flush_s
    seconds and the energy, additional and meta files follow at the end;
    %q{VAR} in suffix becomes the environment variable's value."""
    return PowerScope(methods, interval_ms, out_dir=out_dir, suffix=suffix,
                      filetype=filetype, flush_s=flush_s)
