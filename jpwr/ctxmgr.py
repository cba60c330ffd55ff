"""Measuring power around a block of code, with upstream jpwr's interface:

    from jpwr.ctxmgr import get_power
    from jpwr.gpu.pynvml import power

    with get_power([power()], 100) as scope:
        train()
    energy, additional = scope.energy()   # Wh per device, {"energy_from_counter": ...}
    scope.df                              # timestamps and one power column per device

The suite's own tables have their own names: `samples()` holds every sample
(time, method, device, source, power_w); `channel_energy()` gives one row
per channel: the hardware counter's figure where the channel has one of its
own scope, else the trapezoid-integrated power, with the other figure
beside it. start() and stop() do the same without a `with` block.
begin_window(name) and end_window(name) mark a part of the run (e.g. the
timed iterations) whose energy `windows()` gives per channel."""

from __future__ import annotations

import datetime
import functools
import math
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import SupportsFloat

import numpy as np
import pandas as pd

from jpwr.counting import counted
from jpwr.energy import POWER_COLUMNS, counter_first, energy_table, window_energy
from jpwr.files import RunFiles, check_filetype
from jpwr.method import ESTIMATED, Method
from jpwr.notice import one_line, say
from jpwr.sampler import Sampler
from jpwr.upstream import (
    UpstreamMethod,
    UpstreamOptions,
    columns_of,
    counter_frame,
    is_upstream_method,
    wide_frame,
)

# The environment that tells which rank of which job this is; kept in the
# meta file, and RANK (torchrun) or SLURM_PROCID (srun) become the rank.
JOB_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
                 "SLURM_JOB_ID", "SLURM_STEP_ID")


def rank_from_env() -> int | None:
    for variable in ("RANK", "SLURM_PROCID"):
        if os.environ.get(variable, "").isdigit():
            return int(os.environ[variable])
    return None


def _positive(value: object, what: str) -> float:
    try:
        number = float(value) if isinstance(value, (SupportsFloat, str)) else math.nan
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{what} must be a positive number, got {value!r}")
    return number


@dataclass
class Window:
    """A named part of a run: wall-clock edges and the hardware counters
    read at them (per method, None where it has none)."""

    begin: float
    counters_begin: list
    end: float | None = None
    counters_end: list | None = None


WINDOW_COLUMNS = ["window", "host", "rank", "method", "device", "source", "scope", "counted",
                  "energy_wh", "basis", "integrated_wh", "counter_wh", "duration_s", "samples",
                  "t_start", "t_end"]


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat()


class PowerScope:
    def __init__(self, methods: Sequence[Method], interval_ms: float, *,
                 options: dict | None = None, out_dir: str | os.PathLike | None = None,
                 suffix: str = "", filetype: str = "csv", flush_s: float = 2.0,
                 rank: int | None = None) -> None:
        # method objects written for upstream jpwr run through an adapter
        self.methods = [UpstreamMethod(m) if not isinstance(m, Method) and is_upstream_method(m)
                        else m for m in methods]
        if not self.methods or not all(isinstance(m, Method) for m in self.methods):
            raise ValueError("get_power needs a non-empty list of method objects, "
                             "e.g. [jpwr.gpu.pynvml.power()] or jpwr.methods.from_names(['auto'])")
        self.interval_ms = _positive(interval_ms, "interval (ms)")
        self.flush_s = _positive(flush_s, "flush interval (s)")
        check_filetype(filetype)
        self.host = socket.gethostname()
        # the caller's (jpwr --use-mpi: the MPI rank), else the launcher's
        self.rank = rank if rank is not None else rank_from_env()
        self.files = RunFiles(out_dir, suffix, filetype) if out_dir is not None else None
        self.start_time: float | None = None
        self.end_time: float | None = None
        self._sampler: Sampler | None = None
        self._windows: dict[str, Window] = {}
        self.options = UpstreamOptions.from_dict(options)
        self._finalized: dict[str, pd.DataFrame] = {}
        # upstream's table: a plain attribute, so that a caller's columns
        # (scope.df["nodename"] = ...) stay; filled when the measurement stops
        self.df = wide_frame(self.upstream_columns, [], [])

    @property
    def upstream_columns(self) -> list[str]:
        """Upstream's column name of every channel, e.g. 'pynvml:0'."""
        return [column for method in self.methods for column in columns_of(method)]

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
        """Ends the measurement and writes the results. Never raises for a
        failing disk: the measured code has finished, and its results (and
        the caller's) must not be lost to a traceback here."""
        if self._sampler is None or self.end_time is not None:
            return
        for name, window in self._windows.items():
            if window.end is None:
                say(f"warning: window '{name}' was still open at the end; it ends there")
                self.end_window(name)
        self._sampler.stop()
        self.end_time = time.time()
        n = len(self._sampler.times)
        self.df = wide_frame(self.upstream_columns, self._sampler.times[:n], self._sampler.rows[:n])
        for method in self.methods:
            if isinstance(method, UpstreamMethod):
                try:
                    self._finalized.update(method.finalize())
                except Exception as err:  # noqa: BLE001 - the samples are kept all the same
                    say(f"warning: {method.name}'s finalize failed ({one_line(err)}); "
                        f"its additional tables are missing")
        if self.files is not None:
            self._write_results(self.files, self._sampler)

    def begin_window(self, name: str) -> None:
        """Marks the start of a named part of the run. The caller makes the
        device idle first (e.g. torch.cuda.synchronize()), so that the edge
        is where the work is."""
        if self._sampler is None or self.end_time is not None:
            raise RuntimeError(f"window '{name}' must begin while the measurement runs")
        if name in self._windows:
            raise RuntimeError(f"window '{name}' was already begun")
        self._windows[name] = Window(time.time(), self._read_counters())

    def end_window(self, name: str) -> None:
        window = self._windows.get(name)
        if window is None or window.end is not None:
            raise RuntimeError(f"window '{name}' is not open")
        window.counters_end = self._read_counters()
        window.end = time.time()

    def _read_counters(self) -> list:
        readings = []
        for method in self.methods:
            try:
                readings.append(method.energy_j())
            except Exception:  # noqa: BLE001 - a lost counter leaves the integral
                readings.append(None)
        return readings

    def __enter__(self) -> PowerScope:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def _rank_value(self) -> float | int:
        # NaN rather than None: h5 files cannot hold nullable integer columns.
        return np.nan if self.rank is None else self.rank

    @property
    def sampler_cpu_s(self) -> float:
        """CPU time the sampling thread used (NaN until stopped)."""
        return self._sampler.cpu_s if self._sampler is not None else math.nan

    def samples(self) -> pd.DataFrame:
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

    def energy(self) -> tuple[pd.Series, dict[str, pd.DataFrame]]:
        """Upstream's result: (integrated Wh per device as a Series indexed by
        upstream's column names, {"energy_from_counter": one row of counter
        Wh per device}, the latter only where a method has a counter)."""
        table, _ = self.channel_energy()
        integrated = table.set_index(["method", "device"])["integrated_wh"]
        # float64, as upstream's: describe() and arithmetic treat it as numbers
        # (a caller that adds a label, energy["nodename"] = host, gets an
        # object Series then, as with upstream)
        energy = pd.Series([float(integrated.get((m, d), np.nan)) for m, d, _ in self.channels],
                           index=self.upstream_columns, dtype="float64")
        additional = dict(self._finalized)
        sampler = self._sampler
        counters = {}
        if sampler is not None and sampler.counters_last:
            for method, first, last in zip(self.methods, sampler.counters_first,
                                           sampler.counters_last):
                if first is None or last is None:
                    continue
                for column, before, after in zip(columns_of(method), first, last):
                    if np.isfinite(after - before):  # NaN: this channel has no counter
                        counters[column] = (after - before) / 3600
        if counters:
            additional["energy_from_counter"] = counter_frame(counters)
        return energy, additional

    def channel_energy(self) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
        """(energy per channel, {method: counter vs integrated energy})."""
        span = (self.start_time, self.end_time or time.time()) if self.start_time else None
        table = energy_table(self.samples(), span)
        table.insert(0, "host", self.host)
        table.insert(1, "rank", self._rank_value)
        table.insert(5, "counted", counted(table))
        sampler = self._sampler
        if sampler is not None and sampler.counters_last:
            table = counter_first(table, self._counter_wh(sampler.counters_first,
                                                          sampler.counters_last))
        return table, self._additional(table)

    def _counter_wh(self, first: list, last: list) -> dict[tuple[str, str], float]:
        """{(method, device): counter difference in Wh} for channels whose
        counter covers what their power reading covers (on GH200, NVML's
        counter is the module's while its power is the GPU's)."""
        result = {}
        for method, before, after in zip(self.methods, first, last):
            if before is None or after is None:
                continue
            for channel, b, a in zip(method.channels, before, after):
                if not channel.counter_scope:
                    result[(method.name, channel.device)] = (a - b) / 3600
        return result

    def windows(self) -> pd.DataFrame:
        """One row per window and channel (WINDOW_COLUMNS). A window with
        fewer than two samples inside is interpolated from the samples
        around it, and says so on stderr."""
        power = self.samples()
        table = self.channel_energy()[0].set_index(["method", "device"])
        channels = table[["scope", "counted"]].to_dict("index")
        rows = []
        for name, window in self._windows.items():
            if window.end is None or window.counters_end is None:
                continue
            counters = self._counter_wh(window.counters_begin, window.counters_end)
            short = False
            for key, samples in power.groupby(["method", "device", "source"], sort=False):
                method, device, source = (str(part) for part in key)
                samples = samples.sort_values("time", kind="stable")
                figures = window_energy(samples["time"].to_numpy(float), samples["power_w"].to_numpy(float),
                                        window.begin, window.end, counters.get((method, device), np.nan))
                short = short or figures["samples"] < 2
                channel = channels[(method, device)]
                rows.append({"window": name, "host": self.host, "rank": self._rank_value,
                             "method": method, "device": device, "source": source,
                             "scope": channel["scope"], "counted": channel["counted"], **figures,
                             "duration_s": window.end - window.begin,
                             "t_start": window.begin, "t_end": window.end})
            if short:
                say(f"warning: window '{name}' ({window.end - window.begin:.3g} s) holds fewer "
                    f"than two samples at {self.interval_ms:g} ms; channels without a hardware "
                    f"counter are interpolated from the samples around it")
        return pd.DataFrame(rows, columns=WINDOW_COLUMNS)

    def _additional(self, table: pd.DataFrame) -> dict[str, pd.DataFrame]:
        sampler = self._sampler
        if sampler is None or not sampler.counters_last:
            return {}
        integrated = table.set_index(["method", "device"])["integrated_wh"]
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
                             "counter_scope": channel.counter_scope or table.set_index(
                                 ["method", "device"]).loc[(method.name, channel.device), "scope"],
                             "counter_wh": counter_wh, "integrated_wh": by_samples,
                             "difference_pct": 100 * (by_samples - counter_wh) / counter_wh
                             if counter_wh else np.nan})
            result[method.name] = pd.DataFrame(rows)
        return result

    def _write_results(self, files: RunFiles, sampler: Sampler) -> None:
        # The command has finished by now; failing to write must not turn
        # its success into a crash, but it must not go unnoticed either.
        try:
            files.close_power()
        except Exception as err:  # noqa: BLE001 - the last flush of a full disk
            say(f"error: could not complete {files.path('power', 'csv')} ({one_line(err)}); "
                f"{len(sampler.times)} samples were taken, the file holds those it flushed")
        try:
            energy, additional = self.channel_energy()
            windows = self.windows()
            if not windows.empty:
                files.write_table(windows, "windows", "csv")
            files.write_table(energy, "energy")
            for name, table in additional.items():
                files.write_table(table, f"additional_{name}")
            if files.filetype != "csv":
                files.write_table(self.samples(), "power")
        except Exception as err:  # noqa: BLE001 - disk, pandas and h5 errors alike
            say(f"error: could not write the results to {files.dir} ({one_line(err)}); "
                f"the samples are in {files.path('power', 'csv')}")
        # whatever else failed: the run's end and sample count tell `jpwr
        # combine` how many samples the power file lacks
        try:
            files.write_meta(self._meta())
        except Exception as err:  # noqa: BLE001
            say(f"error: could not complete {files.path('meta', 'json')} ({one_line(err)}); "
                f"the share of samples missing from the power file is not known")

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
            "samples": len(self._sampler.times) if finished and self._sampler is not None else None,
        }


def get_power(methods: Sequence[Method], interval_ms: float, options: dict | None = None, *,
              out_dir: str | os.PathLike | None = None, suffix: str = "",
              filetype: str = "csv", flush_s: float = 2.0, rank: int | None = None) -> PowerScope:
    """Measures the given methods every interval_ms while the returned scope
    runs (as a context manager, or between start() and stop()). `options` is
    upstream's dict ({'ignore_measure_errors': bool}). With out_dir,
    samples are appended to out_dir/power<suffix>.csv at most every flush_s
    seconds and the energy, additional and meta files follow at the end;
    %q{VAR} in suffix becomes the environment variable's value. `rank`
    names the process's rank in the files (default: RANK or SLURM_PROCID)."""
    return PowerScope(methods, interval_ms, options=options, out_dir=out_dir, suffix=suffix,
                      filetype=filetype, flush_s=flush_s, rank=rank)
