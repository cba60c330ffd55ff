"""The comparison's plots as PNG files, one panel per like-for-like group
(never two models on one axis) and one energy panel per scope and window
(never a superchip figure beside a GPU-only one on one axis). Bars run
horizontally so that 12 systems' labels do not overlap; legends sit outside
the axes; numbers have 3 significant digits, thousands separated, and their unit. Estimated
energy is hatched; literature figures are grey (dark: a paper's table or
figure; light: derived from a paper's text or an upstream README example),
each only in the panel of its exact configuration."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from caraml.compare import reference
from caraml.compare.power import Timeline
from caraml.compare.repeats import LIKE
from caraml.compare.rows import measured
from caraml.compare.units import number

DPI = 80
BAR_HEIGHT_IN = 0.32  # per bar, so that labels never overlap
MEASURED_COLOUR, ESTIMATED_COLOUR = "tab:blue", "tab:orange"
PUBLISHED_COLOUR, LITERATURE_COLOUR = "0.55", "0.82"


# axis ticks as the tables write numbers: 3 significant digits, thousands separated
TICKS = FuncFormatter(lambda value, _: number(value))


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")  # keeps legends placed outside the axes
    plt.close(fig)
    return path


def _literature(refs: pd.DataFrame, group: pd.DataFrame, figure: str) -> pd.DataFrame:
    """The literature figures of exactly this panel's configuration; a total on one device counts as
    per device."""
    first = group.iloc[0]
    pub = reference.in_panel(refs, first["benchmark"], first["model"], first["precision"], first["size"])
    named = pub["figure"].map(reference.FIGURES)  # a reference file's names, as the row's fields
    if figure == "per_s_per_device":
        one_device = (named == "per_s") & (pd.to_numeric(pub["devices"]) == 1)
        return pub[(named == figure) | one_device]
    return pub[named == figure]


def _batch(size: float | None) -> str:
    """A literature figure's batch, where it names one."""
    return "" if pd.isna(size) else f" batch {size:g}"


def _barh(ax: Axes, labels: list[str], values: list[float], colours: list[str], hatched: list[bool],
          unit: str) -> None:
    bars_ = ax.barh(range(len(values)), values, color=colours)
    for bar, hatch in zip(bars_, hatched):
        if hatch:
            bar.set_hatch("//")
            bar.set_facecolor("white")
            bar.set_edgecolor(ESTIMATED_COLOUR)
    for bar, value in zip(bars_, values):
        ax.annotate(" " + number(value, unit), (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    va="center", fontsize=7)
    ax.set_yticks(range(len(values)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(TICKS)
    ax.margins(x=0.25)  # room for the value labels
    ax.tick_params(axis="x", labelsize=7)


def bars(headline: pd.DataFrame, refs: pd.DataFrame, out: Path) -> list[Path]:
    """Per like-for-like group: throughput per device of each system's best
    row beside the literature figures of exactly that configuration, and its work per Wh
    in one panel per energy scope and window."""
    paths = []
    ok = measured(headline)
    for _, group in ok.groupby(LIKE, sort=False, dropna=False):
        benchmark, unit, like = group["benchmark"].iloc[0], group["unit"].iloc[0], group["like"].iloc[0]
        scopes = list(group.groupby(["energy_scope", "energy_window"], sort=False))
        pub = _literature(refs, group, "per_s_per_device")
        height = 1.2 + BAR_HEIGHT_IN * (len(group) + len(pub))
        fig, axes = plt.subplots(1, 1 + len(scopes), figsize=(4.2 * (1 + len(scopes)), height), squeeze=False)
        labels = [f"{r['system']} batch {r['global_batch']:g} x{r['devices']:g} {r['device_unit']}"
                  for r in group.to_dict("records")]
        labels += [f"{p['system']}{_batch(p['global_batch'])} ({p['kind']})" for p in pub.to_dict("records")]
        values = [*group["per_s_per_device"], *pub["value"]]
        colours = [MEASURED_COLOUR] * len(group) + [
            PUBLISHED_COLOUR if o == "published" else LITERATURE_COLOUR for o in pub["origin"]]
        _barh(axes[0][0], labels, values, colours, [False] * len(values), "")
        axes[0][0].set_title(f"{unit}/s per device", fontsize=9)
        for ax, ((scope, window), rows) in zip(axes[0][1:], scopes):
            _barh(ax, [str(system) for system in rows["system"]], list(rows["work_per_wh"]),
                  [MEASURED_COLOUR] * len(rows), list(rows["energy_estimated"]), "")
            ax.set_title(f"{unit}/Wh, scope {scope}, {window} window", fontsize=9)
        handles = [Patch(color=MEASURED_COLOUR, label="measured"),
                   Patch(facecolor="white", edgecolor=ESTIMATED_COLOUR, hatch="//", label="energy estimated"),
                   Patch(color=PUBLISHED_COLOUR, label="published: paper table/figure"),
                   Patch(color=LITERATURE_COLOUR, label="paper text or upstream README, not published")]
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, fontsize=8,
                   frameon=False)
        fig.suptitle(f"{benchmark} {like}: best configuration per system", fontsize=10)
        fig.tight_layout()
        paths.append(_save(fig, out / f"bars_{_safe(f'{benchmark}_{like}')}.png"))
    return paths


def heatmaps(rows: pd.DataFrame, out: Path) -> list[Path]:
    """Total throughput over global batch size and device count, per system and like-for-like group."""
    paths = []
    for (system, like), group in measured(rows).groupby(["system", "like"], sort=False):
        grid = group.pivot_table(index="devices", columns="global_batch", values="per_s", aggfunc="max")
        if grid.size < 2:
            continue  # one cell says nothing a table does not
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
        paths.append(_save(fig, out / f"heatmap_{_safe(f'{system}_{like}')}.png"))
    return paths


def power_timeline(line: Timeline, title: str, path: Path) -> Path:
    """Power per device over one job, warm-up and timed window shaded."""
    fig, ax = plt.subplots(figsize=(7.5, 2.6))
    for channel, group in line.samples.groupby("channel", sort=False):
        est = " (estimated)" if group["estimated"].any() else ""
        ax.plot(group["t"], group["power_w"], lw=1, label=f"{channel}{est}")
    for window in line.windows.to_dict("records"):
        ax.axvspan(window["start"], window["end"], color="tab:green", alpha=0.12,
                   label=f"{window['window']} window")
    if not line.windows.empty:
        ax.axvspan(0, line.windows["start"].min(), color="0.5", alpha=0.12, label="warm-up")
    ax.set_xlabel("seconds since the job's first sample", fontsize=8)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: number(value, "W")))
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              ncol=1 + len(ax.get_legend_handles_labels()[1]) // 12)
    ax.set_title(title, fontsize=9)
    return _save(fig, path)


def scaling(table: pd.DataFrame, out: Path) -> list[Path]:
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
    return [_save(fig, out / "scaling.png")]
