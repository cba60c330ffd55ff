"""The results history's charts (caraml/compare/trend.py computes the
points): per benchmark and configuration, each system's figure over the
dates of its runs."""

from __future__ import annotations

from pathlib import Path

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import pandas as pd

from caraml.compare.charts import style
from caraml.compare.charts.style import TICKS
from caraml.compare.repeats import LIKE
from caraml.compare.report import slug
from caraml.compare.trend import FIGURE
from caraml.row.verdict import NOT_A_MEASUREMENT


def plot(points: pd.DataFrame, out: Path) -> list[Path]:
    """One figure per benchmark and configuration: a line per system over
    its measurements, each point labelled with its commit, a row that is no
    measurement a hollow marker off the line, a point below its band ringed red, the
    band's lower edge dashed."""
    paths = []
    for (benchmark, *_), group in points.groupby(LIKE, sort=False, dropna=False):
        systems = list(dict.fromkeys(group["system"]))
        fig, ax = plt.subplots(figsize=(8.5, 3.2 + 0.15 * len(systems)))
        for system in systems:
            ours = group[group["system"] == system]
            line = ours[ours["measurement"]]
            drawn = ax.plot(line["when"], line[FIGURE], marker="o", lw=1.2,
                            label=f"{system} ({ours['device_unit'].iloc[0]})")[0]
            short = ours[~ours["measurement"]]
            if not short.empty:
                ax.scatter(short["when"], short[FIGURE], s=36, facecolors="none",
                           edgecolors=drawn.get_color(), label=f"{system}: {NOT_A_MEASUREMENT}")
            for when, value, commit in zip(ours["when"], ours[FIGURE], ours["commit"]):
                ax.annotate(str(commit)[:7], (when, value), textcoords="offset points", xytext=(0, 6),
                            ha="center", fontsize=6)
            low = line["low"].dropna()
            if not low.empty:
                ax.axhline(low.iloc[-1], color=drawn.get_color(), ls="--", lw=0.8)
            below = ours[ours["below"]]
            ax.scatter(below["when"], below[FIGURE], s=140, facecolors="none", edgecolors="red", lw=1.5,
                       label=f"{system}: below its reference band" if not below.empty else None)
        ax.yaxis.set_major_formatter(TICKS)
        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.margins(y=0.15)  # room for the commit above the highest point
        ax.tick_params(labelsize=7)
        ax.set_ylabel(f"{group['unit'].iloc[0]}/s per device", fontsize=8)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        like = group["like"].iloc[0]
        ax.set_title(f"{benchmark} {like}: best row of each run (commit above each point; hollow: not a "
                     "measurement; dashed: lower edge of the reference band)", fontsize=8)
        paths.append(style.save(fig, out / f"history_{slug(f'{benchmark}_{like}')}.png"))
    return paths
