"""The job a time- or energy-to-solution is computed for: how much work
(tokens, images or samples) one real training takes. Each benchmark's
entry of the table says it (caraml/benchmarks.py, its Job): which
configuration stands for the job, the work as a function of the row and
the settings that size it, which become caraml-compare's options. A
configuration that does not stand for the job (resnet18 at 64 px,
cpu-small, a CPU-sized problem) gets no time or energy to solution.
Measured rates times this work are extrapolations, and every table that
shows them says so."""

from __future__ import annotations

import argparse
import math

import pandas as pd

from caraml import benchmarks
from caraml.benchmark_entry import JobSetting


def settings() -> dict[str, JobSetting]:
    """Every setting the benchmarks' jobs declare, by name (one name, one setting)."""
    found: dict[str, JobSetting] = {}
    for entry in benchmarks.all_benchmarks():
        for setting in entry.job.settings if entry.job else ():
            if found.setdefault(setting.name, setting) != setting:
                raise benchmarks.UnknownBenchmark(f"the job setting {setting.name} of benchmark {entry.name} "
                                                  "is declared by another benchmark too: rename one")
    return found


def add_options(parser: argparse.ArgumentParser) -> None:
    """caraml-compare's options that size the jobs, as the entries declare them."""
    for setting in settings().values():
        parser.add_argument(setting.flag, dest=setting.name, type=float, default=setting.default,
                            help=setting.help)


class Jobs:
    """The benchmarks' jobs at these settings (each one not given at its default)."""

    def __init__(self, **given: float | None) -> None:
        known = settings()
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise TypeError(f"no job setting {', '.join(unknown)}")
        self.settings = {name: given.get(name, setting.default) for name, setting in known.items()}

    @classmethod
    def of(cls, args: argparse.Namespace) -> Jobs:
        return cls(**{name: getattr(args, name) for name in settings()})

    def representative(self, row: pd.Series) -> bool:
        """Whether the row's configuration stands for its benchmark's job."""
        entry = benchmarks.find(row["benchmark"])
        return bool(entry and entry.job and entry.job.stands_for(row["model"], row["size"], self.settings))

    def work(self, row: pd.Series) -> tuple[float, str]:
        """Units of work of the job for this row's configuration, and how it was chosen."""
        job = benchmarks.get(row["benchmark"]).job
        if job is None:
            return math.nan, f"n/a: benchmark {row['benchmark']} defines no job"
        return job.work({str(k): v for k, v in row.items()}, self.settings)

    def any_model(self, benchmark: str) -> str:
        """The option that makes every model of the benchmark stand for its job; "" where none does."""
        job = benchmarks.get(benchmark).job
        return settings()[job.any_model].flag if job and job.any_model else ""
