"""A system's figure against its own earlier runs of the same
configuration: a drop beyond their spread is a regression of the system
itself (a driver, a firmware, a node), which a check against published
references alone never sees. caraml-compare checks each system's latest
figure against the results history (--check-history DB), --history checks
each run against the runs before it; both name a drop in one line and give
exit status 4 (docs/compare.md)."""

from __future__ import annotations

import statistics

import pandas as pd

from caraml.compare import repeats, rows
from caraml.compare.units import number

FIGURE = "per_s_per_device"
# a drop counts where it lies below every earlier run, further below their
# median than their spread, and by this share at least: two runs of a
# healthy system differ by a few per cent, which is no regression
NOISE = 0.05


def drop(latest: float, earlier: list[float]) -> float | None:
    """The share latest lies below the earlier runs' median, where that is beyond their spread; else None."""
    if not earlier or pd.isna(latest):
        return None
    median = statistics.median(earlier)
    share = 1 - latest / median
    beyond = max((max(earlier) - min(earlier)) / median, NOISE)
    return share if latest < min(earlier) and share > beyond else None


def _when(dates: list[str]) -> str:
    if len(dates) == 1:
        return f"its run of {dates[0]}"
    return f"its {len(dates)} runs of {dates[0]} to {dates[-1]}"


def sentence(system: str, share: float, dates: list[str], what: str) -> str:
    """`A100 15 % below its run of 2026-11-20 (llm 800M bf16 seq 2048, batch 512)`."""
    return f"{system} {share * 100:.0f} % below {_when(dates)} ({what})"


def _by_platform(frame: pd.DataFrame) -> pd.Series:
    """Each line's configuration with its platform tag for the system: a run
    named A100-new= is still A100's, on whichever of its machines and builds
    (the history keeps no raw evidence of them)."""
    return repeats.config_key(frame.assign(system=frame["system_name"], machine="", build=""))


def against_history(head: pd.DataFrame, every: pd.DataFrame, history: pd.DataFrame) -> list[str]:
    """Per measured headline line (the median of its repeats), a drop below the
    history's earlier runs of its configuration, one line each; the rows of
    this comparison's own runs (every's work packages) are not earlier runs."""
    done = rows.measured(head) if not head.empty else head
    earlier = rows.measured(rows.at_default_limit(history)[0])
    earlier = earlier[~earlier["work_package"].isin(set(every["work_package"]))]
    if done.empty or earlier.empty:
        return []
    earlier = earlier.assign(key=_by_platform(earlier))
    said = []
    for key, line in zip(_by_platform(done), done.to_dict("records")):
        now = pd.to_datetime(line["date"], utc=True, errors="coerce")
        same = earlier[(earlier["key"] == key) & ~(earlier["when"] >= now)]
        if same.empty:
            continue
        runs = same.groupby("run_uuid").agg(value=(FIGURE, "median"),
                                            when=("when", "min")).sort_values("when")
        share = drop(line[FIGURE], list(runs["value"]))
        if share is not None:
            said.append(sentence(line["system"], share, list(runs["when"].dt.strftime("%Y-%m-%d")),
                                 f"{line['benchmark']} {line['like']}, batch {line['global_batch']:g}, "
                                 f"{number(line[FIGURE])} against "
                                 f"{number(runs['value'].median())} {line['unit']}/s per "
                                 f"{line['device_unit']}")
                        + "; ratios use the latest run")
    return said


def run_to_run(points: pd.DataFrame, group: list[str]) -> tuple[list[str], int]:
    """--history: each measured point against the earlier points of its
    series (group), one line per drop; and how many series end in one."""
    said, ending = [], 0
    for _, series in rows.measured(points).groupby(group, sort=False, dropna=False):
        series = series.sort_values("when")
        values = list(series[FIGURE])
        for i, point in enumerate(series.to_dict("records")):
            share = drop(values[i], values[:i])
            if share is None:
                continue
            said.append(sentence(point["system"], share,
                                 list(series["when"].iloc[:i].dt.strftime("%Y-%m-%d")),
                                 f"{point['benchmark']} {point['like']}: {number(values[i])} "
                                 f"{point['unit']}/s per {point['device_unit']} on {point['when']:%Y-%m-%d}, "
                                 f"commit {point['commit']}, run {str(point['run_uuid'])[:8]} on "
                                 f"{point['host']}"))
            ending += i == len(values) - 1
    return said, ending

