"""The power-limit sweep's frontier: per system and swept configuration
(a sweep's rows share system, benchmark and configuration label and differ
in the row's power_limit), time against energy to solution of the job at
each limit per device, the Pareto-optimal limits marked, and the limit with
the most work per Wh named beside the default limit's figure and the time
it costs.

Only measurements go on the frontier. A row that is no measurement is left
out of it and out of the chart (never divided or extrapolated): its line in
the table keeps its rates and says why. A failed point, and a point whose limit was not
restored after its job, is listed with its reason and never on the front;
the latter is drawn as a cross where it has figures. Computed here, drawn
by caraml/compare/charts/frontier.py: nothing here imports matplotlib."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from caraml.compare import repeats
from caraml.compare.decision import pareto
from caraml.compare.figures import AS_MEASURED, solution, solution_work_per_wh
from caraml.compare.jobs import Jobs
from caraml.compare.repeats import LIKE
from caraml.compare.report import configuration
from caraml.compare.rows import cause
from caraml.compare.units import number
from caraml.row.status import RAN

# the rows of one sweep: as the sweep's JUBE parameter makes them, one per limit
SWEEP = ["system", "benchmark", "label"]
# a point is like for like with the sweep's reference point when these agree too
SAME_RUN = [*LIKE, "global_batch", "nodes", "devices"]
# frontier.csv: one line per sweep point
CSV_COLUMNS = ["sweep", "system", "benchmark", "like", "label", "limit", "power_limit", "power_limit_asked_w",
               "power_limit_before_w", "power_limit_w", "power_limit_restored", "state", "reason",
               "not_a_measurement", "kind", "off", "per_s", "sweep_work_per_wh", "energy_scope",
               "sweep_basis",
               "energy_estimated", "power_w_per_device", "time_h", "energy_kwh", "time_ratio", "wh_ratio",
               "row_file"]
# the row model's flags that put a point's limit in doubt (caraml/row/power_limit.py flags), in words
DOUBTS = {"power-limit-not-set": "the job never set the power limit (its driver takes none)",
          "power-limit-differs-on-ranks": "the devices reported other limits than rank 0's on ranks {}",
          "power-limit-put-back-early":
              "a stop signal ({}) put the limit back before the last iteration ended"}
ON_FRONT, DOMINATED, FLAGGED, NOT_MEASURED, FAILED = ("Pareto-optimal", "dominated", "flagged",
                                                      "not a measurement", "failed")


@dataclass
class Sweep:
    system: str
    benchmark: str
    title: str  # system, configuration, batch and layout
    unit: str
    # the energy's scope and window (sweep_basis) every point on the frontier shares; "" without a frontier
    energy_scope: str
    basis: str
    estimated: bool  # whether that energy is jpwr's estimate
    job: str  # the job's work (as Jobs.work says), or why there is no time or energy to solution
    representative: bool  # whether the configuration stands for the job (a time to solution)
    # one line per limit, lowest first: the rows' columns, and `limit` (its label), `sweep_work_per_wh` and
    # `sweep_basis` (the figure energy to solution divides by), `kind` (Pareto-optimal, dominated, flagged,
    # not a measurement or failed), `off` (why it is off the frontier), `standing` (the two in words),
    # `time_h`,
    # `energy_kwh` (the job's, NaN where not extrapolated), `wh_ratio` and `time_ratio` (to the default)
    points: pd.DataFrame
    headline: str

    @property
    def scope(self) -> str:
        """The frontier's energy scope and window in words."""
        return f"{self.energy_scope} scope, {self.basis}" if self.energy_scope else ""

    def on_axis(self) -> pd.DataFrame:
        """The points a chart of time against energy to solution shows: those
        on the frontier, dominated or flagged, with both figures, measured at
        the frontier's scope and window (a flagged point at another is in the
        table only)."""
        points = self.points
        return points[points["kind"].isin([ON_FRONT, DOMINATED, FLAGGED]) & points["time_h"].notna()
                      & points["energy_kwh"].notna() & (points["energy_scope"] == self.energy_scope)
                      & (points["sweep_basis"] == self.basis)]


def limit_label(row: pd.Series) -> str:
    """A point's limit per device as the device reported it (a GH200 module's
    limit named so), and as the user asked for it."""
    module = row.get("power_limit_scope") == "module"
    reported = number(row["power_limit_w"], "W") + (" module" if module else "")
    return f"default ({reported})" if row["limit_default"] else f"{reported} (asked {row['power_limit']})"


def _doubts(row: pd.Series) -> list[str]:
    """The row's flags that put its limit in doubt, in words (a default point sets nothing)."""
    out = []
    for flag in row["flags"].split():
        name, _, ranks = flag.partition("(")
        if name in DOUBTS and not (row["limit_default"] and name == "power-limit-not-set"):
            out.append(DOUBTS[name].format(ranks.rstrip(")")))
    return out


def _off(row: pd.Series, reference: pd.Series | None) -> tuple[str, str]:
    """The point's kind off the frontier and why; ("", "") where it may be on it."""
    left, restored = "", row["power_limit_restored"]
    restored = None if restored is None or pd.isna(restored) else bool(restored)  # a numpy bool too
    if restored is False:
        left = "power limit not restored after the job"
    elif restored is None and not row["limit_default"]:
        left = "power limit not recorded as restored after the job"
    if left:
        left += (f" (it was {number(row['power_limit_before_w'], 'W')} before): the node may have been left "
                 "capped")
    if row["state"] not in RAN:
        return FAILED, "; ".join(filter(None, [f"{row['state']}: {row['reason']}".rstrip(": "), left]))
    doubts = _doubts(row)
    if left or doubts:
        return FLAGGED, "; ".join(filter(None, [left, *doubts]))
    if not row["measurement"]:
        return NOT_MEASURED, cause(row)
    if pd.isna(row["sweep_work_per_wh"]):
        return FLAGGED, "no energy figure"
    if reference is None:
        return "", ""
    if (row["energy_scope"], row["sweep_basis"]) != (reference["energy_scope"], reference["sweep_basis"]):
        ours, theirs = (f"scope {r['energy_scope']}, {r['sweep_basis']}" for r in (row, reference))
        return FLAGGED, f"energy at {ours}, the sweep's at {theirs}: not like for like"
    differs = [c for c in SAME_RUN
               if row[c] != reference[c] and not (pd.isna(row[c]) and pd.isna(reference[c]))]
    return (FLAGGED, f"not the sweep's configuration ({', '.join(differs)} differ)") if differs else ("", "")


def _reference(points: pd.DataFrame) -> pd.Series | None:
    """The point every other is compared with: the default limit's
    measurement, else the highest limit measured; None where no point is
    a measurement."""
    usable = points[[_off(row, None) == ("", "") for _, row in points.iterrows()]]
    if usable.empty:
        return None
    default = usable[usable["limit_default"]]
    return default.iloc[0] if not default.empty else repeats.top(usable, "power_limit_w")


def _standing(kind: str, off: str) -> str:
    """Where a point stands, in words: the cause of a point that is no measurement says what it is."""
    return off if kind in (NOT_MEASURED, FAILED) else f"{kind}: {off}" if off else kind


def _sweep(group: pd.DataFrame, jobs: Jobs) -> Sweep:
    points = group.assign(limit=[limit_label(row) for _, row in group.iterrows()])
    used = [solution_work_per_wh(row) for _, row in points.iterrows()]
    points = points.assign(sweep_work_per_wh=[w for w, _ in used], sweep_basis=[b for _, b in used])
    points = points.sort_values(["power_limit_w", "power_limit_asked_w"], na_position="last")
    reference = _reference(points)
    src = reference if reference is not None else points.iloc[0]
    offs = [_off(row, reference) for _, row in points.iterrows()]
    points["kind"], points["off"] = [k for k, _ in offs], [o for _, o in offs]
    on = points["kind"] == ""
    # the front of time and energy per unit of work: the same front as of the job's time and energy
    per_work = pd.DataFrame({"s": 1 / points.loc[on, "per_s"],
                             "wh": 1 / points.loc[on, "sweep_work_per_wh"]})
    points.loc[on, "kind"] = pareto(per_work, time="s", energy="wh").map({True: ON_FRONT, False: DOMINATED})
    points["standing"] = [_standing(k, o) for k, o in zip(points["kind"], points["off"])]
    # time and energy to solution of every measurement (flagged ones too); no other row is ever extrapolated
    representative = jobs.representative(src)
    work, how = jobs.work(src) if representative else (math.nan, "")
    none = {"time_h": math.nan, "energy_kwh": math.nan}
    solved = [solution(row, work, row["per_s"], AS_MEASURED, row["nodes"], how)
              if representative and kind not in (NOT_MEASURED, FAILED) else none
              for (_, row), kind in zip(points.iterrows(), points["kind"])]
    points["time_h"], points["energy_kwh"] = [s["time_h"] for s in solved], [s["energy_kwh"] for s in solved]
    if reference is not None:
        points["wh_ratio"] = (points["sweep_work_per_wh"] / reference["sweep_work_per_wh"]).where(on)
        points["time_ratio"] = (reference["per_s"] / points["per_s"]).where(on)
    else:
        points["wh_ratio"] = points["time_ratio"] = math.nan
    job = how if representative else (
        f"{src['like']} does not stand for the job (caraml/benchmarks.py's representative configuration): no "
        "time or energy to solution" + (f"; {flag} N makes any model the job"
                                        if (flag := jobs.any_model(src["benchmark"])) else ""))
    sweep = Sweep(system=src["system"], benchmark=src["benchmark"],
                  title=f"{src['system']} {src['benchmark']} {configuration(src)}", unit=src["unit"],
                  energy_scope="" if reference is None else reference["energy_scope"],
                  basis="" if reference is None else reference["sweep_basis"],
                  estimated=bool(points.loc[on, "energy_estimated"].any()), job=job,
                  representative=representative, points=points, headline="")
    sweep.headline = _headline(sweep, reference)
    return sweep


def _headline(sweep: Sweep, reference: pd.Series | None) -> str:
    """The limit with the most work per Wh, beside the default limit's figure and the time it costs."""
    points, unit = sweep.points, sweep.unit
    on = points[points["kind"].isin([ON_FRONT, DOMINATED])]
    if on.empty:
        return (f"{sweep.title}: no limit of the sweep is a measurement, so no frontier (each point's reason "
                "below).")
    where = f"{sweep.scope}{', energy estimated' if sweep.estimated else ''}"
    best = repeats.top(on, "sweep_work_per_wh")
    figure = f"{number(best['sweep_work_per_wh'])} {unit}/Wh"
    if reference is None or not reference["limit_default"]:
        return (f"{sweep.title}: most {unit} per Wh at {best['limit']}: {figure} ({where}); the sweep has no "
                "measured default-limit point, so no ratio to it.")
    if best["limit_default"]:
        return (f"{sweep.title}: the default limit ({number(best['power_limit_w'], 'W')}) gives the most "
                f"{unit} per Wh: {figure} ({where}); no other limit gives more.")
    return (f"{sweep.title}: most {unit} per Wh at {best['limit']}: {figure}, {number(best['wh_ratio'])}x "
            f"the default limit's ({number(reference['power_limit_w'], 'W')}) "
            f"{number(reference['sweep_work_per_wh'])} {unit}/Wh, taking {number(best['time_ratio'])}x as "
            f"long ({where}).")


def sweeps(rows: pd.DataFrame, jobs: Jobs) -> list[Sweep]:
    """One Sweep per system and swept configuration; none for a system that swept nothing."""
    swept = rows[rows["limit_swept"]]
    return [_sweep(group, jobs) for _, group in swept.groupby(SWEEP, sort=False, dropna=False)]
