"""Figures derived from the rows, like for like only: each system's best
configuration, ratios to a reference system (refused with a one-line reason
where the two rows are not comparable), time and energy to solution for the
configurations that stand for the job, and scaling efficiency."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from caraml.compare import repeats
from caraml.compare.jobs import Jobs
from caraml.compare.repeats import GROUP, LIKE
from caraml.compare.rows import measured, ran

# The full table's ratios also need the same batch and node count
MATCH = [*LIKE, "global_batch", "nodes"]
THROUGHPUT_FIGURES = ["per_s", "per_s_per_device", "per_s_per_package", "per_s_per_node"]
# work_per_wh_gpu: the accelerators alone over the whole run, the scope every GPU system has;
# work_per_node_wh: the whole nodes over the job, as the centre's meter gives it
ENERGY_FIGURES = ["work_per_wh", "work_per_wh_gpu", "work_per_node_wh", "power_w_per_device"]
RATIO_FIGURES = [*THROUGHPUT_FIGURES, "mfu", *ENERGY_FIGURES]
EXTRAPOLATED = "estimate: extrapolated from the measured rate"
NOT_REPRESENTATIVE = "not representative"
# which line of the solution table a line is (its `case_key`), and the line's `case` in words
ONE_NODE, FASTEST, AS_MEASURED = "one-node", "fastest", "as-measured"
CASES = {ONE_NODE: "one node (best configuration)", FASTEST: "fastest measured ({nodes:g} nodes)",
         AS_MEASURED: "as measured"}


@dataclass(frozen=True)
class Refusal:
    """A ratio of the headline refused, and why: one line under its benchmark's headline."""

    benchmark: str
    like: str
    reason: str

    def __str__(self) -> str:
        return f"{self.benchmark} {self.like}: {self.reason}"


def mark_best(rows: pd.DataFrame) -> pd.DataFrame:
    """Adds `best`: the measured rows (all its repeats) of each system's
    configuration per like-for-like group with the highest median
    throughput per device."""
    rows = rows.copy()
    rows["best"] = False
    ok = measured(rows).dropna(subset=["per_s_per_device"])
    if not ok.empty:
        key = repeats.config_key(ok)
        ok = ok.assign(_key=key, _median=key.map(ok.groupby(key, sort=False)["per_s_per_device"].median()))
        best = set(ok.loc[ok.groupby(GROUP, dropna=False)["_median"].idxmax().to_numpy(), "_key"])
        rows.loc[ok.index[ok["_key"].isin(best)], "best"] = True
    return rows


def refusal(row: pd.Series, ref: pd.Series, figure: str) -> str:
    """Why the figure of row may not be divided by that of ref; empty where it may."""
    if figure == "per_s_per_device" and row["device_unit"] != ref["device_unit"]:
        return (f"per-device figures not divided: {row['system']} counts per {row['device_unit']}, "
                f"{ref['system']} per {ref['device_unit']}; the ratio per package or per node says it")
    if figure == "per_s_per_package":
        for side in (row, ref):
            if pd.isna(side["per_s_per_package"]):
                return (f"per package not divided: {side['system']} ({side['system_name']}) declares no "
                        "accelerator package in platform.xml")
    if figure == "work_per_wh_gpu":
        for side in (row, ref):
            if side["energy_scope"] == "n/a":
                return f"energy not divided: {side['system']} has no energy figure"
            if pd.isna(side["work_per_wh_gpu"]):
                return f"GPU-scope energy not divided: {side['system']} has no GPU-only energy channel"
        return ""
    if figure == "work_per_node_wh":
        # neither has a node figure: no ratio (NaN) and nothing to say beside every row
        both_lack = pd.isna(row[figure]) and pd.isna(ref[figure])
        return "" if both_lack else node_refusal([row, ref])
    if figure == "mfu" and row["peak_basis"] != ref["peak_basis"]:
        return (f"MFU not divided: {row['system']} against a {row['peak_basis']} peak, {ref['system']} "
                f"against a {ref['peak_basis']} peak")
    if figure in ENERGY_FIGURES:
        for side in (row, ref):
            if side["energy_scope"] == "n/a":
                return f"energy not divided: {side['system']} has no energy figure"
        if row["energy_scope"] != ref["energy_scope"]:
            return (f"energy not divided: {row['system']} counts scope {row['energy_scope']}, "
                    f"{ref['system']} scope {ref['energy_scope']}; shown side by side")
        if row["energy_window"] != ref["energy_window"]:
            return (f"energy not divided: {row['system']} over the {row['energy_window']} window, "
                    f"{ref['system']} over the {ref['energy_window']} window")
        if figure == "power_w_per_device":
            unknown = [side["system"] for side in (row, ref)
                       if pd.isna(side["energy_devices"] / side["devices"])]
            if unknown:
                return (f"power per device not divided: {unknown[0]} does not say how many energy devices "
                        "it measured")
            if row["energy_devices"] / row["devices"] != ref["energy_devices"] / ref["devices"]:
                return (f"power per device not divided: {row['system']} measures {row['energy_devices']:g} "
                        f"energy devices for {row['devices']:g} {row['device_unit']}s, {ref['system']} "
                        f"{ref['energy_devices']:g} for {ref['devices']:g}")
    return ""


def _no_node_figure(line: pd.Series) -> str:
    """Why a row has no work per node-Wh, as its record says it."""
    state, reason = line["node_energy_state"], line["node_energy_reason"]
    if state == "n/a":
        return "its row records no node energy"
    if state == "measured" and reason == "n/a":
        return "measured, but the row has no work to divide by it"
    return state if reason == "n/a" else f"{state}: {reason}"


def node_refusal(lines: list[pd.Series]) -> str:
    """Why work per node-Wh of these rows may not be ranked or divided, in
    one line naming each system without a node figure; empty where every
    one has one over the same window."""
    lacking = [f"{line['system']} ({_no_node_figure(line)})" for line in lines
               if pd.isna(line["work_per_node_wh"])]
    if lacking:
        return f"node energy not compared: no node figure for {', '.join(dict.fromkeys(lacking))}"
    windows = {line["system"]: line["node_energy_window"] for line in lines}
    if len(set(windows.values())) > 1:
        return ("node energy not compared: over different windows ("
                + ", ".join(f"{system} {window}" for system, window in windows.items()) + ")")
    return ""


def ratios(row: pd.Series, ref: pd.Series | None, why_none: str,
           intervals: bool = False) -> tuple[dict, list[str]]:
    """Each figure of row over that of ref, NaN where refused, and the
    reasons; with intervals (lines of repeats, caraml/compare/repeats.py)
    each ratio's 95 % interval too (`_low`, `_high`, and `_no_interval`: why none)."""
    out: dict[str, float | str] = {}
    reasons = []
    for figure in RATIO_FIGURES:
        name = f"{figure}_ratio"
        out[name] = math.nan
        if intervals:
            out.update({f"{name}_low": math.nan, f"{name}_high": math.nan, f"{name}_no_interval": ""})
        if ref is None:
            continue
        reason = refusal(row, ref, figure)
        if reason:
            reasons.append(reason)
            continue
        out[name] = row[figure] / ref[figure]
        # the reference over itself is 1 by definition: no interval
        if intervals and pd.notna(out[name]) and row["system"] != ref["system"]:
            low, high, why = repeats.interval(row, ref, figure)
            out.update({f"{name}_low": low, f"{name}_high": high, f"{name}_no_interval": why})
    if ref is None and why_none:
        reasons.append(why_none)
    out["ratio_estimated"] = ref is not None and bool(row["energy_estimated"] or ref["energy_estimated"])
    return out, list(dict.fromkeys(reasons))


def add_ratios(rows: pd.DataFrame, reference_system: str) -> pd.DataFrame:
    """Adds `<figure>_ratio` against the reference system's row of the same
    configuration, batch and node count, and `ratio_note` where one is refused."""
    ok = measured(rows)
    # the reference's configuration as the median of its repeats
    ref_rows = repeats.collapse(ok[ok["system"] == reference_system]).drop_duplicates(MATCH).set_index(MATCH)
    extra = []
    for _, row in rows.iterrows():
        key = tuple(row[MATCH])
        ref = ref_rows.loc[key] if row["measurement"] and key in ref_rows.index else None
        values, reasons = ratios(row, ref, "")
        extra.append({**values, "ratio_note": "; ".join(reasons)})
    return pd.concat([rows.reset_index(drop=True), pd.DataFrame(extra, index=range(len(rows)))], axis=1)


def headline(rows: pd.DataFrame, reference_system: str) -> tuple[pd.DataFrame, list[Refusal]]:
    """Per benchmark and like-for-like group, each system's best row with its
    ratios to the reference system's best row of the same group; a system
    without a measurement in a benchmark gets a line with its failure. Also
    every ratio refused, with its reason."""
    best = repeats.collapse(rows[rows["best"]])
    lines, notes = [], []
    for (benchmark, *like), group in best.groupby(LIKE, sort=False, dropna=False):
        refs = group[group["system"] == reference_system]
        ref = refs.iloc[0] if not refs.empty else None
        for _, row in group.iterrows():
            why = f"no ratios: {reference_system} has no row of this configuration"
            values, reasons = ratios(row, ref, why if row["system"] != reference_system else "", True)
            lines.append({**row.to_dict(), **values})
            notes += [Refusal(str(benchmark), str(row["like"]), reason) for reason in reasons]
    for benchmark, group in rows.groupby("benchmark", sort=False):
        for system, sys_rows in group.groupby("system", sort=False):
            short = ran(sys_rows)
            if measured(sys_rows).empty and not short.empty:
                # no measurement: shown with its figures and marked, no ratio, no rank
                line = short.iloc[int(short["per_s_per_device"].fillna(0).to_numpy(dtype=float).argmax())
                                   ].to_dict()
                lines.append({**line, **ratios(pd.Series(line), None, "", True)[0]})
            elif measured(sys_rows).empty:
                line = sys_rows.iloc[0].to_dict()
                line["reason"] = "; ".join(dict.fromkeys(r for r in sys_rows["reason"] if r)) or \
                    "no row is a measurement"
                # failed, or not run yet (queued, pending, running, dry-run): the row's own word
                line["state"] = "/".join(dict.fromkeys(sys_rows["state"]))
                lines.append(line)
    table = pd.DataFrame(lines)
    return table, list(dict.fromkeys(notes))


def solution(row: pd.Series, work: float, rate: float, case_key: str, nodes: float, how: str) -> dict:
    """The job (work, chosen as how says) at rate on nodes: its time and energy to solution, and
    which line it is (case_key: ONE_NODE, FASTEST or AS_MEASURED, with `case` in words)."""
    line = {"system": row["system"], "benchmark": row["benchmark"], "like": row["like"],
            "case_key": case_key, "case": CASES[case_key].format(nodes=nodes), "nodes": nodes,
            "from_devices": row["devices"], "from_nodes": row["nodes"],
            "from_global_batch": row["global_batch"], "job": how, "energy_scope": row["energy_scope"],
            "energy_estimated": row["energy_estimated"], "representative": how != NOT_REPRESENTATIVE}
    if how == NOT_REPRESENTATIVE:
        return {**line, "time_h": NOT_REPRESENTATIVE, "energy_kwh": NOT_REPRESENTATIVE,
                "energy_basis": "", "gpu_energy_kwh": NOT_REPRESENTATIVE,
                "node_energy_kwh": NOT_REPRESENTATIVE, "label": NOT_REPRESENTATIVE}
    seconds = work / rate
    work_per_wh, basis = solution_work_per_wh(row)
    kind = "estimated" if row["energy_estimated"] else "measured"
    return {**line, "time_h": seconds / 3600, "energy_kwh": work / work_per_wh / 1000,
            # the accelerators alone over the whole run: the scope every GPU system has
            "gpu_energy_kwh": work / row["work_per_wh_gpu"] / 1000,
            # whole nodes as the centre's meter gives them, over the job window (NaN without a node figure)
            "node_energy_kwh": work / row["work_per_node_wh"] / 1000,
            "energy_basis": basis, "label": f"{EXTRAPOLATED}; energy {kind}, scope {row['energy_scope']}"}


def solution_work_per_wh(row: pd.Series) -> tuple[float, str]:
    """The work per Wh energy to solution divides the job by, and its
    window: the timed window's where the row has it (it matches the
    throughput's window, no warm-up), else the headline window's."""
    if not pd.isna(row["work_per_wh_timed"]):
        return row["work_per_wh_timed"], "timed iterations"
    return row["work_per_wh"], f"{row['energy_window']} window"


def time_and_energy_to_solution(rows: pd.DataFrame, jobs: Jobs) -> pd.DataFrame:
    """Per system and like-for-like group: the job on one node at the best
    row's rate per node, and on the node count that finishes first (the
    highest total throughput measured); `not representative` where the
    configuration does not stand for the job (see Jobs.representative)."""
    ok = measured(rows if "best" in rows else mark_best(rows))
    out = []
    for _, group in ok.groupby(GROUP, sort=False, dropna=False):
        bests = repeats.collapse(group[group["best"]])
        if bests.empty:
            continue
        best = bests.iloc[0]
        work, how = jobs.work(best) if jobs.representative(best) else (math.nan, NOT_REPRESENTATIVE)
        out.append(solution(best, work, best["per_s_per_node"], ONE_NODE, 1, how))
        configs = repeats.collapse(group)
        fastest = repeats.top(configs, "per_s")
        nodes = fastest["nodes"]
        if nodes == 1:
            continue  # the fastest on one node: no faster than the one-node line, and no second line
        out.append(solution(fastest, work, fastest["per_s"], FASTEST, nodes, how))
    return pd.DataFrame(out)


def scaling_efficiency(rows: pd.DataFrame) -> pd.DataFrame:
    """Where runs of one system and like-for-like group differ in device
    count: strong efficiency at a fixed global batch, (T/T0)/(d/d0), and weak
    efficiency at a fixed batch per device, (T/d)/(T0/d0), both against the
    run with the fewest devices."""
    ok = measured(rows).copy()
    ok["batch_per_device"] = ok["global_batch"] / ok["devices"]
    columns = ["system", "benchmark", "like", "scaling", "series", "global_batch", "nodes", "devices",
               "base_devices", "per_s", "efficiency"]
    out = []
    for kind, key in (("strong", "global_batch"), ("weak", "batch_per_device")):
        for _, group in ok.groupby(GROUP + [key], sort=False, dropna=False):
            if group["devices"].nunique() < 2:
                continue
            group = group.sort_values(["devices", "nodes"])
            base = group.iloc[0]
            for _, row in group.iterrows():
                if kind == "strong":
                    eff = (row["per_s"] / base["per_s"]) / (row["devices"] / base["devices"])
                else:
                    eff = row["per_s_per_device"] / base["per_s_per_device"]
                series = (f"strong at batch {row['global_batch']:g}" if kind == "strong"
                          else f"weak at {row['batch_per_device']:g} per device")
                out.append({"system": row["system"], "benchmark": row["benchmark"], "like": row["like"],
                            "scaling": kind, "series": series, "global_batch": row["global_batch"],
                            "nodes": row["nodes"], "devices": row["devices"], "base_devices": base["devices"],
                            "per_s": row["per_s"], "efficiency": eff})
    return pd.DataFrame(out, columns=columns)
