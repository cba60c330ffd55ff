"""What every chart shares: the Agg backend, the resolution, the colours
(measured blue, estimated energy hatched orange, literature grey), axis
ticks written as the tables write numbers, horizontal bars sized so that
12 systems' labels stay apart, and saving with legends outside the axes."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from caraml.compare.units import number

DPI = 80
BAR_HEIGHT_IN = 0.32  # per bar, so that labels never overlap
MEASURED_COLOUR, ESTIMATED_COLOUR = "tab:blue", "tab:orange"
PUBLISHED_COLOUR, LITERATURE_COLOUR = "0.55", "0.82"

# axis ticks as the tables write numbers: 3 significant digits, thousands separated
TICKS = FuncFormatter(lambda value, _: number(value))


def save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")  # keeps legends placed outside the axes
    plt.close(fig)
    return path


def barh(ax: Axes, labels: list[str], values: list[float], colours: list[str], hatched: list[bool],
         said: list[str] | None = None) -> None:
    """Horizontal bars, the first at the top, each with its value written
    after it (or the text of said), estimated ones hatched and hollow."""
    bars = ax.barh(range(len(values)), values, color=colours)
    for bar, hatch in zip(bars, hatched):
        if hatch:
            bar.set_hatch("//")
            bar.set_facecolor("white")
            bar.set_edgecolor(ESTIMATED_COLOUR)
    for bar, text in zip(bars, said if said is not None else [number(v) for v in values]):
        middle = bar.get_y() + bar.get_height() / 2
        ax.annotate(" " + text, (bar.get_width(), middle), va="center", fontsize=7)
    ax.set_yticks(range(len(values)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.xaxis.set_major_formatter(TICKS)
    ax.margins(x=0.25)  # room for the value labels
    ax.tick_params(axis="x", labelsize=7)
