"""A power-limit sweep's chart (caraml/compare/frontier.py computes its
points): time against energy to solution of the job at each limit, the
Pareto-optimal limits ringed red and joined, a flagged point crossed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from caraml.compare.charts import style
from caraml.compare.charts.style import MEASURED_COLOUR, TICKS
from caraml.compare.frontier import DOMINATED, FLAGGED, ON_FRONT, Sweep
from caraml.compare.report import slug

_STYLE: dict[str, dict[str, Any]] = {
    ON_FRONT: {"marker": "o", "edgecolors": "red", "lw": 1.6, "color": MEASURED_COLOUR},
    DOMINATED: {"marker": "o", "edgecolors": "0.3", "lw": 0.8, "color": MEASURED_COLOUR},
    FLAGGED: {"marker": "X", "edgecolors": "none", "lw": 0, "color": "tab:red"}}
_LEGEND = {ON_FRONT: "Pareto-optimal limit (red ring, dashed front)", DOMINATED: "dominated limit",
           FLAGGED: "flagged, never on the front (reason in the table)"}


def chart(sweep: Sweep, out: Path) -> Path | None:
    """Time against energy to solution of the job at each limit, the
    Pareto-optimal limits ringed red and joined; None where no point has both."""
    drawn = sweep.on_axis()
    if drawn.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for p in drawn.to_dict("records"):
        marker = dict(_STYLE[p["kind"]])
        if p["energy_estimated"] and p["kind"] != FLAGGED:
            marker["color"] = "white"  # estimated energy: hollow, as in the other charts
        ax.scatter(p["time_h"], p["energy_kwh"], s=55, marker=marker["marker"], c=marker["color"],
                   edgecolors=marker["edgecolors"], linewidths=marker["lw"])
        # a flagged point's label under it: it often sits beside a point of the front
        flagged = p["kind"] == FLAGGED
        ax.annotate(f" {p['limit']}{', flagged' if flagged else ''}", (p["time_h"], p["energy_kwh"]),
                    fontsize=7, va="top" if flagged else "bottom")
    front = drawn[drawn["kind"] == ON_FRONT].sort_values("time_h")
    ax.step(front["time_h"], front["energy_kwh"], where="post", color="red", lw=1, ls="--")
    est = " (estimated)" if sweep.estimated else ""
    ax.set_xlabel("time to solution [h]", fontsize=8)
    ax.set_ylabel(f"energy to solution [kWh]\n{sweep.scope}{est}", fontsize=8)
    ax.xaxis.set_major_formatter(TICKS)
    ax.yaxis.set_major_formatter(TICKS)
    ax.tick_params(labelsize=7)
    ax.margins(0.2)
    handles = [Line2D([], [], ls="", marker=_STYLE[k]["marker"], markerfacecolor=_STYLE[k]["color"],
                      markeredgecolor=_STYLE[k]["edgecolors"], label=_LEGEND[k]) for k in _STYLE
               if k in set(drawn["kind"])]
    if sweep.estimated:
        handles.append(Line2D([], [], ls="", marker="o", markerfacecolor="white", markeredgecolor="0.3",
                              label="hollow: energy estimated"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"{sweep.title}\nover the power limit per device; the job: {sweep.job}; estimates",
                 fontsize=8)
    return style.save(fig, out / f"frontier_{slug(sweep.title)}.png")
