"""The decision's charts (caraml/compare/decision.py computes what they
show): the rankings side by side, best first, each bar with its ratio to
the reference system and its error bar; the accelerators' share of node
energy; cost to solution, cheapest first; time against energy to solution
with the Pareto front joined."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from caraml.compare.charts import style
from caraml.compare.charts.style import BAR_HEIGHT_IN, ESTIMATED_COLOUR, MEASURED_COLOUR, TICKS, barh
from caraml.compare.decision import GPU_FIGURE, HIGH, LOW, RANKINGS, Decision
from caraml.compare.report import slug
from caraml.compare.units import number


def _stem(kind: str, decision: Decision) -> str:
    return f"{kind}_{slug(f'{decision.benchmark}_{decision.like}')}"


def _against(system: str, ratio: float, low: float, high: float, reference: str) -> str:
    """A bar's ratio to the reference system with its 95 % interval where it has one: the
    reference's own bar says so, a refused ratio says so too."""
    if system == reference:
        return "reference"
    within = f", {number(low)}–{number(high)}" if pd.notna(low) else ""
    return f"{number(ratio)}x {reference}{within}" if pd.notna(ratio) else "no ratio"


def _bars(ax: Axes, ranked: pd.DataFrame, figure: str, ratio: str, reference: str, title: str) -> None:
    values = list(ranked[figure])
    said = [f"{number(value)}  ({_against(system, r, low, high, reference)})"
            for value, system, r, low, high in zip(values, ranked["system"], ranked[ratio],
                                                   ranked[f"{ratio}_low"], ranked[f"{ratio}_high"])]
    barh(ax, list(ranked["system"]), values, [MEASURED_COLOUR] * len(values),
         list(ranked["energy_estimated"]) if figure == GPU_FIGURE else [False] * len(values), said)
    ax.errorbar(values, range(len(values)), xerr=[[v - lo for v, lo in zip(values, ranked[LOW])],
                                                  [hi - v for v, hi in zip(values, ranked[HIGH])]],
                fmt="none", ecolor="0.2", capsize=2, lw=0.8)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=3))  # thousands-separated ticks stay apart
    ax.set_title(title, fontsize=9)


def ranked(decision: Decision, out: Path) -> Path:
    """The rankings of one benchmark side by side, best at the top of each."""
    shown = [(f, t, r) for f, t, r in RANKINGS if not decision.ranked[f].empty]
    longest = max(len(decision.ranked[f]) for f, _, _ in shown)
    fig, axes = plt.subplots(1, len(shown), figsize=(4.6 * len(shown), 1.3 + BAR_HEIGHT_IN * longest),
                             squeeze=False)
    for ax, (figure, title, ratio) in zip(axes[0], shown):
        lines = decision.ranked[figure]
        _bars(ax, lines, figure, ratio, decision.reference, title.format(unit=lines["unit"].iloc[0]))
    handles = [Patch(color=MEASURED_COLOUR,
                     label="median of the runs (one run: its rate), best batch per system"),
               Patch(facecolor="white", edgecolor=ESTIMATED_COLOUR, hatch="//", label="energy estimated"),
               Patch(facecolor="white", edgecolor="0.2",
                     label="error bar: min-max of the runs (one run: its rate at the mean and the median "
                           "iteration)"),
               Patch(facecolor="white", edgecolor="white",
                     label=f"(ratio x {decision.reference}, low–high): the ratio and its 95 % interval, "
                           "where the runs give one")]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=1, fontsize=8,
               frameon=False)
    fig.suptitle(f"{decision.benchmark} {decision.like}: ranked, best first (ratio to {decision.reference})",
                 fontsize=10)
    fig.tight_layout()
    return style.save(fig, out / f"{_stem('decision', decision)}.png")


def share(decision: Decision, out: Path) -> Path | None:
    """Each system's node energy split into its accelerators' share and the
    rest of the node (MAELSTROM's node against accelerator), where jpwr
    measured both over the run; None where no system has the share."""
    shares = decision.shares
    if shares.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 1.3 + BAR_HEIGHT_IN * len(shares)))
    y = range(len(shares))
    accelerators = list(shares["accelerator_share_of_node_pct"])
    ax.barh(y, accelerators, color=MEASURED_COLOUR, label="accelerators")
    ax.barh(y, [100 - a for a in accelerators], left=accelerators, color="0.75",
            label="the rest of the node (CPUs, memory, network, fans)")
    for i, (part, basis) in enumerate(zip(accelerators, shares["accelerator_share_basis"])):
        ax.annotate(f" {number(part)} % ({basis})", (part, i), va="center", fontsize=7)
    ax.set_yticks(list(y), list(shares["system"]), fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the node's energy over the run [%] (jpwr, node scope)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"{decision.benchmark} {decision.like}: the accelerators' share of node energy", fontsize=8)
    return style.save(fig, out / f"{_stem('node_share', decision)}.png")


def cost(decision: Decision, costs: pd.DataFrame, currency: str, out: Path) -> Path | None:
    """Cost to solution of the job on one node, cheapest first: node-hours and electricity stacked."""
    if costs.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 1.3 + BAR_HEIGHT_IN * len(costs)))
    y = range(len(costs))
    ax.barh(y, costs["node_hours_cost"], color=MEASURED_COLOUR, label="node-hours")
    bars = ax.barh(y, costs["electricity_cost"].fillna(0), left=costs["node_hours_cost"], color="tab:green",
                   label=f"electricity ({costs['energy_scope'].iloc[0]} scope x PUE)")
    for bar, estimated in zip(bars, costs["energy_estimated"]):
        if estimated:
            bar.set_hatch("//")
    for i, line in enumerate(costs.to_dict("records")):
        # a system without accelerator-only energy keeps its node-hours, its electricity said missing
        said, end = (f" {number(line['cost'])} {currency}", line["cost"]) if pd.notna(line["cost"]) else \
            (f" {number(line['node_hours_cost'])} {currency} + electricity missing", line["node_hours_cost"])
        ax.annotate(said, (end, i), va="center", fontsize=7)
    ax.set_yticks(list(y), list(costs["system"]), fontsize=7)
    ax.invert_yaxis()
    ax.margins(x=0.25)
    ax.xaxis.set_major_formatter(TICKS)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"{decision.benchmark} {decision.like}: cost to solution on one node [{currency}], "
                 "cheapest first (estimate)", fontsize=8)
    return style.save(fig, out / f"{_stem('cost', decision)}.png")


def solution(decision: Decision, out: Path) -> Path | None:
    """Time against energy to solution of the job on one node, the Pareto front joined."""
    points = decision.solution_points
    if points.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    markers = "osD^v<>phP*X8"
    for i, p in enumerate(points.to_dict("records")):
        ax.scatter(p["time_h"], p["gpu_energy_kwh"], marker=markers[i % len(markers)], s=55,
                   facecolors="white" if p["energy_estimated"] else None,
                   edgecolors="red" if p["front"] else "0.3", lw=1.6 if p["front"] else 0.8,
                   label=f"{p['system']}{' (on the front)' if p['front'] else ''}")
    front = points[points["front"]].sort_values("time_h")
    ax.step(front["time_h"], front["gpu_energy_kwh"], where="post", color="red", lw=1, ls="--")
    ax.set_xlabel("time to solution on one node [h]", fontsize=8)
    ax.set_ylabel("energy to solution, gpu scope [kWh]", fontsize=8)
    ax.xaxis.set_major_formatter(TICKS)
    ax.yaxis.set_major_formatter(TICKS)
    ax.tick_params(labelsize=7)
    ax.margins(0.15)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    job = points["job"].iloc[0]
    ax.set_title(f"{decision.benchmark} {decision.like}, {job}: estimates; red dashed: the Pareto front",
                 fontsize=8)
    return style.save(fig, out / f"{_stem('solution', decision)}.png")


def charts(decision: Decision, costs: pd.DataFrame, currency: str, out: Path) -> list[Path]:
    """Every chart of one decision that has something to show, in the page's order."""
    drawn = [ranked(decision, out), solution(decision, out), share(decision, out),
             cost(decision, costs, currency, out)]
    return [path for path in drawn if path is not None]
