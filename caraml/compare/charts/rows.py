"""The rows' charts, one panel per like-for-like group (never two models on
one axis) and one energy panel per scope and window (never a superchip
figure beside a GPU-only one on one axis): each system's best row beside
the literature figures of exactly its configuration, throughput over batch
and device count, scaling efficiency. Bars run horizontally so that 12
systems' labels do not overlap; legends sit outside the axes; numbers have
3 significant digits, thousands separated. Estimated energy is hatched;
literature figures are grey (dark: a paper's table or figure; light:
derived from a paper's text or an upstream README example)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from caraml.compare import reference
from caraml.compare.charts import style
from caraml.compare.charts.style import (
    BAR_HEIGHT_IN,
    ESTIMATED_COLOUR,
    LITERATURE_COLOUR,
    MEASURED_COLOUR,
    PUBLISHED_COLOUR,
    TICKS,
    barh,
)
from caraml.compare.repeats import LIKE
from caraml.compare.report import slug
from caraml.compare.rows import measured
from caraml.compare.units import number


def _batch(size: float | None) -> str:
    """A literature figure's batch, where it names one."""
    return "" if pd.isna(size) else f" batch {size:g}"


def bars(headline: pd.DataFrame, refs: pd.DataFrame, out: Path) -> list[Path]:
    """Per like-for-like group: throughput per device of each system's best
    row beside the literature figures of exactly that configuration, and its work per Wh
    in one panel per energy scope and window."""
    paths = []
    for _, group in measured(headline).groupby(LIKE, sort=False, dropna=False):
        benchmark, unit, like = group["benchmark"].iloc[0], group["unit"].iloc[0], group["like"].iloc[0]
        scopes = list(group.groupby(["energy_scope", "energy_window"], sort=False))
        pub = reference.literature(refs, group.iloc[0], "per_s_per_device")
        height = 1.2 + BAR_HEIGHT_IN * (len(group) + len(pub))
        fig, axes = plt.subplots(1, 1 + len(scopes), figsize=(4.2 * (1 + len(scopes)), height), squeeze=False)
        labels = [f"{r['system']} batch {r['global_batch']:g} x{r['devices']:g} {r['device_unit']}"
                  for r in group.to_dict("records")]
        labels += [f"{p['system']}{_batch(p['global_batch'])} ({p['kind']})" for p in pub.to_dict("records")]
        values = [*group["per_s_per_device"], *pub["value"]]
        colours = [MEASURED_COLOUR] * len(group) + [
            PUBLISHED_COLOUR if o == "published" else LITERATURE_COLOUR for o in pub["origin"]]
        barh(axes[0][0], labels, values, colours, [False] * len(values))
        axes[0][0].set_title(f"{unit}/s per device", fontsize=9)
        for ax, ((scope, window), lines) in zip(axes[0][1:], scopes):
            barh(ax, list(lines["system"]), list(lines["work_per_wh"]), [MEASURED_COLOUR] * len(lines),
                 list(lines["energy_estimated"]))
            ax.set_title(f"{unit}/Wh, scope {scope}, {window} window", fontsize=9)
        handles = [Patch(color=MEASURED_COLOUR, label="measured"),
                   Patch(facecolor="white", edgecolor=ESTIMATED_COLOUR, hatch="//", label="energy estimated"),
                   Patch(color=PUBLISHED_COLOUR, label="published: paper table/figure"),
                   Patch(color=LITERATURE_COLOUR, label="paper text or upstream README, not published")]
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8,
                   frameon=False)
        fig.suptitle(f"{benchmark} {like}: best configuration per system", fontsize=10)
        fig.tight_layout()
        paths.append(style.save(fig, out / f"bars_{slug(f'{benchmark}_{like}')}.png"))
    return paths


def heatmaps(lines: pd.DataFrame, out: Path) -> list[Path]:
    """Total throughput over global batch size and device count, per system and like-for-like group
    that ran more than one of each."""
    paths = []
    for (system, like), group in measured(lines).groupby(["system", "like"], sort=False):
        grid = group.pivot_table(index="devices", columns="global_batch", values="per_s", aggfunc="max")
        if min(grid.shape) < 2:
            continue  # one row or column of cells says nothing the table beside it does not
        fig, ax = plt.subplots(figsize=(1.6 + 0.9 * grid.shape[1], 1.4 + 0.6 * grid.shape[0]))
        cells = grid.to_numpy(dtype=float)
        image = ax.imshow(cells, cmap="viridis", aspect="auto", origin="lower")
        middle = (grid.min().min() + grid.max().max()) / 2
        for i, j in zip(*np.nonzero(~np.isnan(cells))):
            value = cells[i, j]
            ax.text(j, i, number(value), ha="center", va="center", fontsize=8,
                    color="k" if value > middle else "w")  # readable on viridis' light and dark ends
        ax.set_xticks(range(grid.shape[1]), [f"{c:g}" for c in grid.columns], fontsize=8)
        ax.set_yticks(range(grid.shape[0]), [f"{i:g}" for i in grid.index], fontsize=8)
        ax.set_xlabel("global batch size")
        ax.set_ylabel("devices")
        ax.set_title(f"{system} {like}: {group['unit'].iloc[0]}/s", fontsize=8)
        fig.colorbar(image, ax=ax, format=TICKS)
        paths.append(style.save(fig, out / f"heatmap_{slug(f'{system}_{like}')}.png"))
    return paths


def scaling(table: pd.DataFrame, out: Path) -> list[Path]:
    """Scaling efficiency over devices, one line per system, group and series; none without scaling runs."""
    if table.empty:
        return []
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for (system, like, series), group in table.groupby(["system", "like", "series"], sort=False):
        ax.plot(group["devices"], group["efficiency"], marker="o", label=f"{system} {like}: {series}")
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set_xlabel("devices")
    ax.set_ylabel("efficiency")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title("scaling efficiency against the smallest run", fontsize=9)
    return [style.save(fig, out / "scaling.png")]
