"""The decision page that opens the report: per benchmark, the configuration
that stands for the job (caraml/benchmarks.py's representative model and
size; of its like-for-like groups the one most systems measured), each
system at its best measured batch, ranked best first by throughput per node,
per accelerator package, by work per Wh of the accelerators alone and, where
every ranked system has the centre's node figure over one window, by work
per Wh of whole nodes, the ratio to the reference system written on each
bar; then time against energy to solution with the Pareto front marked. Rows that are no measurements,
failures and systems without the figure are named under the charts, never
ranked. Computed here, drawn by caraml/compare/charts/decision.py: nothing
here imports matplotlib."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from caraml.compare import intervals, repeats
from caraml.compare.figures import ONE_NODE, node_refusal
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
GPU_FIGURE = "work_per_wh_gpu"  # the energy ranking every GPU system has: its hatched bars are estimates
# what each ranking's sentence calls its first
LEADS = {"per_s_per_node": "Fastest per node", "per_s_per_package": "Fastest per accelerator package",
         GPU_FIGURE: "Most energy-efficient, like for like",
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
    # the solution's points with both time and energy (GPU scope) as numbers, `front` on the Pareto front
    solution_points: pd.DataFrame = field(default_factory=pd.DataFrame)
    leaders: list[str] = field(default_factory=list)  # what the first screen says in words
    margins: list[dict] = field(default_factory=list)  # each sentence's figures, for decision.json

    @property
    def shares(self) -> pd.DataFrame:
        """The ranked systems whose accelerators' share of node energy jpwr measured, fastest first."""
        return self.ranked["per_s_per_node"].dropna(subset=["accelerator_share_of_node_pct"])


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
                if GPU_FIGURE in missing:
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
                                          & (solutions["case_key"] == ONE_NODE)]
            decision.solution_points = front(decision.solution)
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
        caveat = " (energy estimated)" if figure == GPU_FIGURE and best["energy_estimated"] else ""
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


def pareto(points: pd.DataFrame, time: str = "time_h", energy: str = "gpu_energy_kwh") -> pd.Series:
    """Whether each point is on the front: no other point is as fast and as frugal, and better in one."""
    front = []
    for _, p in points.iterrows():
        dominated = ((points[time] <= p[time]) & (points[energy] <= p[energy])
                     & ((points[time] < p[time]) | (points[energy] < p[energy])))
        front.append(not dominated.any())
    return pd.Series(front, index=points.index, dtype=bool)


def front(solution: pd.DataFrame) -> pd.DataFrame:
    """The solution lines with a time and an energy to solution (GPU scope,
    whole run) as numbers, and `front`: whether each is on the Pareto front;
    a configuration that does not stand for the job has neither."""
    points = solution[solution["representative"]] if not solution.empty else solution
    points = points.astype({"time_h": float, "gpu_energy_kwh": float})
    points = points.dropna(subset=["time_h", "gpu_energy_kwh"])
    return points.assign(front=pareto(points) if not points.empty else pd.Series(dtype=bool))
