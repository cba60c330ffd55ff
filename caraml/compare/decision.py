"""The decision page that opens the report: per benchmark, the configuration
that stands for the job (caraml/benchmarks.py's representative model and
size; of its like-for-like groups the one most systems measured), each
system at its best measured batch, ranked best first by throughput per node,
per accelerator package, by work per Wh of the accelerators alone and, where
every ranked system has the centre's node figure over one window, by work
per Wh of whole nodes, the ratio to the reference system written on each
bar; then time against energy to solution with the Pareto front marked. Rows that are no measurements,
failures and systems without the figure are named under the charts, never
ranked."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from caraml.compare import intervals, plots, repeats
from caraml.compare.figures import node_refusal
from caraml.compare.jobs import Jobs
from caraml.compare.repeats import LIKE
from caraml.compare.rows import cause, measured, shown_name
from caraml.compare.units import number

# (figure, title, what a bar's unit is, the ratio's column)
RANKINGS = [("per_s_per_node", "{unit}/s per node", "per_s_per_node_ratio"),
            ("per_s_per_package", "{unit}/s per accelerator package", "per_s_per_package_ratio"),
            ("work_per_wh_gpu", "{unit}/Wh, accelerators alone (gpu scope), whole run",
             "work_per_wh_gpu_ratio"),
            ("work_per_node_wh", "{unit}/Wh, whole nodes (node scope, the centre's meter), job window",
             "work_per_node_wh_ratio")]
NODE_FIGURE = "work_per_node_wh"
# what each ranking's sentence calls its first
LEADS = {"per_s_per_node": "Fastest per node", "per_s_per_package": "Fastest per accelerator package",
         "work_per_wh_gpu": "Most energy-efficient, like for like",
         NODE_FIGURE: "Most energy-efficient per whole node"}
# the error bar: the repeats' min-max; of a single run, the rates at its mean and at its median
# timed iteration (all its row holds of their spread)
LOW, HIGH = "rate_low", "rate_high"


@dataclass
class Decision:
    benchmark: str
    like: str
    reference: str
    ranked: dict[str, pd.DataFrame] = field(default_factory=dict)  # figure -> rows, best first
    unranked: list[str] = field(default_factory=list)  # one line per system left out, and why
    solution: pd.DataFrame = field(default_factory=pd.DataFrame)
    leaders: list[str] = field(default_factory=list)  # what the first screen says in words
    margins: list[dict] = field(default_factory=list)  # each sentence's figures, for decision.json


def _group(head: pd.DataFrame, benchmark: str, jobs: Jobs) -> pd.DataFrame:
    """The representative like-for-like group of the benchmark that most systems measured."""
    ok = measured(head[head["benchmark"] == benchmark])
    ok = ok[[jobs.representative(row) for _, row in ok.iterrows()]] if not ok.empty else ok
    if ok.empty:
        return ok
    sizes = ok.groupby(LIKE, sort=False, dropna=False)["system"].nunique()
    return ok.groupby(LIKE, sort=False, dropna=False).get_group(sizes.idxmax())


def _ranked(group: pd.DataFrame, figure: str) -> pd.DataFrame:
    done = group.dropna(subset=[figure]).sort_values(figure, ascending=False, kind="stable")
    # one run's spread: its rate at the mean timed iteration and at the median one
    scale = done["per_s_median"] / done["per_s"]
    value_at_median = done[figure] * scale.where(scale > 0)
    both = pd.concat([done[figure], value_at_median.fillna(done[figure])], axis=1)
    repeated = done["runs"] >= 2
    return done.assign(**{LOW: done[f"{figure}_min"].where(repeated, both.min(axis=1)),
                          HIGH: done[f"{figure}_max"].where(repeated, both.max(axis=1))})


def decide(table: pd.DataFrame, head: pd.DataFrame, solutions: pd.DataFrame, jobs: Jobs,
           reference_system: str) -> list[Decision]:
    out = []
    for benchmark in dict.fromkeys(b for b in table["benchmark"] if b != "n/a"):
        group = _group(head, benchmark, jobs)
        if group.empty:
            continue
        like = group["like"].iloc[0]
        decision = Decision(benchmark, like, reference_system)
        for figure, _, _ in RANKINGS:
            decision.ranked[figure] = _ranked(group, figure)
        # like for like: whole nodes only where every ranked system has them, over one window
        refused = node_refusal([line for _, line in group.iterrows()])
        if refused:
            decision.ranked[NODE_FIGURE] = decision.ranked[NODE_FIGURE].iloc[:0]
            decision.unranked.append(f"{refused}; the energy ranking counts the accelerators alone "
                                     "(gpu scope, whole run)")
        for system, rows_ in table[table["benchmark"] == benchmark].groupby("system", sort=False):
            if system in set(group["system"]):
                missing = [f for f, _, _ in RANKINGS if system not in set(decision.ranked[f]["system"])]
                if "work_per_wh_gpu" in missing:
                    scope = rows_["energy_scope"].iloc[0]
                    decision.unranked.append(f"{system}: not in the energy ranking (no GPU-only energy "
                                             f"channel; its energy scope is {scope})")
                if "per_s_per_package" in missing:
                    decision.unranked.append(f"{system}: not in the per-package ranking (platform.xml "
                                             "declares no package for it)")
                continue
            other = measured(rows_)
            if not other.empty:
                why = f"no measured row of {like}; it measured {', '.join(dict.fromkeys(other['like']))}"
            else:
                why = "; ".join(dict.fromkeys(cause(line) for _, line in rows_.iterrows()))
            decision.unranked.append(f"{system}: not ranked ({why})")
        if not solutions.empty:
            decision.solution = solutions[(solutions["benchmark"] == benchmark) & (solutions["like"] == like)
                                          & (solutions["case"] == "one node (best configuration)")]
        decision.leaders, decision.margins = _leaders(decision)
        out.append(decision)
    return out


def margin(kind: str, best: pd.Series, runner_up: pd.Series | None, ratio: float, interval: tuple,
           separate: int | None = None) -> dict:
    """One sentence's margin over the runner-up, as decision.json holds it."""
    low, high, why = interval
    return {"ranking": kind, "best": best["system"], "runner_up": None if runner_up is None
            else runner_up["system"], "margin": ratio, "low": low, "high": high,
            "significant": repeats.significant(low, high), "no_interval": why,
            "tie": runner_up is not None and intervals.tie(ratio), "runs_to_separate": separate}


def over_runner_up(kind: str, ranked: pd.DataFrame, figure: str) -> tuple[str, dict]:
    """`1.06x JUPITER, 95 % CI 1.04–1.08` and its figures: the first over the second of a ranking."""
    best = ranked.iloc[0]
    if len(ranked) < 2:
        return "the only system ranked", margin(kind, best, None, math.nan, (math.nan, math.nan, ""))
    runner_up = ranked.iloc[1]
    ratio = best[figure] / runner_up[figure]
    interval = repeats.interval(best, runner_up, figure)
    separate = repeats.runs_to_separate(best, runner_up, figure, ratio)
    return (f"over {shown_name(runner_up)} {repeats.ratio_words(ratio, *interval, separate)}",
            margin(kind, best, runner_up, ratio, interval, separate))


def _leaders(decision: Decision) -> tuple[list[str], list[dict]]:
    lines, margins = [], []
    for figure, title, ratio in RANKINGS:
        ranked = decision.ranked[figure]
        if ranked.empty:
            continue
        best = ranked.iloc[0]
        unit = title.format(unit=best["unit"])
        # the ratio to the reference, unless the sentence already holds it (the reference leads or is second)
        against = (f"; {repeats.reference_words(best, ratio, decision.reference)}" if pd.notna(best[ratio])
                   and decision.reference not in set(ranked["system"].iloc[:2]) else "")
        caveat = " (energy estimated)" if figure == "work_per_wh_gpu" and best["energy_estimated"] else ""
        if figure == NODE_FIGURE and pd.notna(best["accelerator_share_of_node_pct"]):
            share = number(best["accelerator_share_of_node_pct"])
            caveat = f" (accelerators' share of its node energy {share} %, jpwr's " \
                     f"{best['accelerator_share_basis']})"
        words, figures_ = over_runner_up(LEADS[figure], ranked, figure)
        margins.append({**figures_, "value": best[figure], "unit": unit, "runs": int(best["runs"]),
                        **{f"reference{end}": best.get(f"{ratio}{end}") for end in ("", "_low", "_high")}})
        runner_up = shown_name(ranked.iloc[1]) if len(ranked) > 1 else None
        who = repeats.leader(shown_name(best), runner_up, figures_["margin"])
        lines.append(f"{LEADS[figure]}: {who}, {number(best[figure])} {unit} "
                     f"({repeats.spread(best, figure)}){caveat}; {words}{against}.")
    return lines, margins


def _bars(ax: Axes, ranked: pd.DataFrame, figure: str, ratio: str, reference: str, title: str) -> None:
    values = list(ranked[figure])
    colours = [plots.MEASURED_COLOUR] * len(values)
    plots._barh(ax, list(ranked["system"]), values, colours, list(ranked["energy_estimated"])
                if figure == "work_per_wh_gpu" else [False] * len(values), "")
    ax.errorbar(values, range(len(values)), xerr=[[v - lo for v, lo in zip(values, ranked[LOW])],
                                                  [hi - v for v, hi in zip(values, ranked[HIGH])]],
                fmt="none", ecolor="0.2", capsize=2, lw=0.8)
    for text, r in zip([t for t in ax.texts], ranked.itertuples()):
        value, low, high = (getattr(r, f"{ratio}{end}") for end in ("", "_low", "_high"))
        # the reference system's own bar says so, a refused ratio says n/a; its 95 % interval where it has one
        within = f", {number(low)}–{number(high)}" if pd.notna(low) else ""
        suffix = "reference" if r.system == reference else f"{number(value)}x {reference}{within}" \
            if pd.notna(value) else "no ratio"
        text.set_text(f"{text.get_text()}  ({suffix})")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=3))  # thousands-separated ticks stay apart
    ax.set_title(title, fontsize=9)


def ranked_chart(decision: Decision, out: Path) -> Path:
    """The rankings of one benchmark side by side, best at the top of each."""
    shown = [(f, t, r) for f, t, r in RANKINGS if not decision.ranked[f].empty]
    longest = max(len(decision.ranked[f]) for f, _, _ in shown)
    fig, axes = plt.subplots(1, len(shown), figsize=(4.6 * len(shown), 1.3 + plots.BAR_HEIGHT_IN * longest),
                             squeeze=False)
    for ax, (figure, title, ratio) in zip(axes[0], shown):
        ranked = decision.ranked[figure]
        _bars(ax, ranked, figure, ratio, decision.reference, title.format(unit=ranked["unit"].iloc[0]))
    handles = [Patch(color=plots.MEASURED_COLOUR,
                     label="median of the runs (one run: its rate), best batch per system"),
               Patch(facecolor="white", edgecolor=plots.ESTIMATED_COLOUR, hatch="//",
                     label="energy estimated"),
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
    return plots._save(fig, out / f"decision_{plots._safe(f'{decision.benchmark}_{decision.like}')}.png")


def share_chart(decision: Decision, out: Path) -> Path | None:
    """Each system's node energy split into its accelerators' share and the
    rest of the node (MAELSTROM's node against accelerator), where jpwr
    measured both over the run; None where no system has the share."""
    shares = decision.ranked["per_s_per_node"].dropna(subset=["accelerator_share_of_node_pct"])
    if shares.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 1.3 + plots.BAR_HEIGHT_IN * len(shares)))
    y = range(len(shares))
    accelerators = list(shares["accelerator_share_of_node_pct"])
    ax.barh(y, accelerators, color=plots.MEASURED_COLOUR, label="accelerators")
    ax.barh(y, [100 - a for a in accelerators], left=accelerators, color="0.75",
            label="the rest of the node (CPUs, memory, network, fans)")
    for i, (share, basis) in enumerate(zip(accelerators, shares["accelerator_share_basis"])):
        ax.annotate(f" {number(share)} % ({basis})", (share, i), va="center", fontsize=7)
    ax.set_yticks(list(y), list(shares["system"]), fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of the node's energy over the run [%] (jpwr, node scope)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"{decision.benchmark} {decision.like}: the accelerators' share of node energy", fontsize=8)
    return plots._save(fig, out / f"node_share_{plots._safe(f'{decision.benchmark}_{decision.like}')}.png")


def pareto(points: pd.DataFrame, time: str = "time_h", energy: str = "gpu_energy_kwh") -> pd.Series:
    """Whether each point is on the front: no other point is as fast and as frugal, and better in one."""
    front = []
    for _, p in points.iterrows():
        dominated = ((points[time] <= p[time]) & (points[energy] <= p[energy])
                     & ((points[time] < p[time]) | (points[energy] < p[energy])))
        front.append(not dominated.any())
    return pd.Series(front, index=points.index, dtype=bool)


def cost_chart(decision: Decision, costs: pd.DataFrame, currency: str, out: Path) -> Path | None:
    """Cost to solution of the job on one node, cheapest first: node-hours and electricity stacked."""
    if costs.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 1.3 + plots.BAR_HEIGHT_IN * len(costs)))
    y = range(len(costs))
    ax.barh(y, costs["node_hours_cost"], color=plots.MEASURED_COLOUR, label="node-hours")
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
    ax.xaxis.set_major_formatter(plots.TICKS)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"{decision.benchmark} {decision.like}: cost to solution on one node [{currency}], "
                 "cheapest first (estimate)", fontsize=8)
    return plots._save(fig, out / f"cost_{plots._safe(f'{decision.benchmark}_{decision.like}')}.png")


def solution_chart(decision: Decision, out: Path) -> Path | None:
    """Time against energy to solution of the job on one node, the Pareto front joined."""
    points = decision.solution
    if points.empty:
        return None
    points = points[points["time_h"].map(lambda v: not isinstance(v, str))]
    points = points.astype({"time_h": float, "gpu_energy_kwh": float}).dropna(
        subset=["time_h", "gpu_energy_kwh"])
    if points.empty:
        return None
    points = points.assign(front=pareto(points))
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
    ax.xaxis.set_major_formatter(plots.TICKS)
    ax.yaxis.set_major_formatter(plots.TICKS)
    ax.tick_params(labelsize=7)
    ax.margins(0.15)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    job = points["job"].iloc[0]
    ax.set_title(f"{decision.benchmark} {decision.like}, {job}: estimates; red dashed: the Pareto front",
                 fontsize=8)
    return plots._save(fig, out / f"solution_{plots._safe(f'{decision.benchmark}_{decision.like}')}.png")
