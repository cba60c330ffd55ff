"""The power timelines (caraml/compare/power.py reads the samples and
folds the runs): one chart per configuration, power per channel over the
job, the run that stands for the configuration in colour with its warm-up
and timed window shaded, each other run of the configuration (its repeats)
as thin grey lines behind it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from caraml.compare import power
from caraml.compare.charts import style
from caraml.compare.report import slug
from caraml.compare.units import number

OTHER_RUNS = "0.72"  # the grey of the folded runs' lines


@dataclass(frozen=True)
class Drawn:
    """A configuration's timeline as drawn: which run is in colour, which in grey, which had no samples."""

    path: Path
    title: str
    coloured: str
    grey: tuple[str, ...]
    without_samples: tuple[str, ...]


def timeline(folded: power.Folded, path: Path) -> Drawn | None:
    """Power per channel over the job of each run of one configuration; None where no run left samples."""
    found = [(run, power.timeline(run.work_package)) for run in folded.runs]
    drawn = [(run, line) for run, line in found if line is not None]
    if not drawn:
        return None
    (shown, line), rest = drawn[0], drawn[1:]
    fig, ax = plt.subplots(figsize=(7.5, 2.6))
    for _, other in rest:
        for _, group in other.samples.groupby("channel", sort=False):
            ax.plot(group["t"], group["power_w"], lw=0.5, color=OTHER_RUNS, zorder=1)
    for channel, group in line.samples.groupby("channel", sort=False):
        est = " (estimated)" if group["estimated"].any() else ""
        ax.plot(group["t"], group["power_w"], lw=1, label=f"{channel}{est}", zorder=2)
    windows = line.windows
    for name, start, end in zip(windows["window"], windows["start"], windows["end"]):
        ax.axvspan(start, end, color="tab:green", alpha=0.12, label=f"{name} window")
    if not line.windows.empty:
        ax.axvspan(0, line.windows["start"].min(), color="0.5", alpha=0.12, label="warm-up")
    handles, labels = ax.get_legend_handles_labels()
    if rest:
        handles.append(Line2D([], [], lw=0.5, color=OTHER_RUNS))
        labels.append(f"the other {len(rest)} run{'s' if len(rest) > 1 else ''}, each channel")
    ax.set_xlabel("seconds since the job's first sample", fontsize=8)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: number(value, "W")))
    ax.tick_params(labelsize=7)
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              ncol=1 + len(labels) // 12)
    median = " (the median of its measured runs)" \
        if shown is folded.runs[0] and shown.measurement and len(folded.runs) > 1 else ""
    ax.set_title(f"{folded.title}\nin colour: run {shown.name}{median}", fontsize=9)
    return Drawn(style.save(fig, path), folded.title, shown.name, tuple(run.name for run, _ in rest),
                 tuple(run.name for run, line in found if line is None))


def draw(job: tuple[power.Folded, Path]) -> Drawn | None:
    """timeline of one of jobs' pairs (a process pool maps one argument)."""
    return timeline(*job)


def jobs(folded: list[power.Folded], out: Path) -> list[tuple[power.Folded, Path]]:
    """Each configuration's timeline and the file it is drawn into."""
    return [(f, out / f"power_{n:03d}_{slug(f.system)}.png") for n, f in enumerate(folded)]
