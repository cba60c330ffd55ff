"""Figures derived from the measured rows: each system's best configuration,
ratios to a reference system, time- and energy-to-solution for a job, and
scaling efficiency over node or device counts."""

from __future__ import annotations

import math

import pandas as pd

from caraml.compare.jobs import Jobs

# The figures that get a ratio to the reference system's same configuration
RATIO_FIGURES = ["throughput_per_device", "throughput_per_node", "mfu", "energy_per_device_wh",
                 "work_per_wh", "mean_power_w_per_device"]
# Rows of the same system and configuration
GROUP = ["system", "benchmark", "config"]
# What makes a row of another system the same configuration
MATCH = ["benchmark", "config", "global_batch", "nodes"]
EXTRAPOLATED = "estimate: extrapolated from the measured rate"


def energy_kind(source: str) -> str:
    """'estimated' or 'measured', as the row's energy source says; n/a otherwise."""
    source = str(source)
    if source.startswith("estimated"):
        return "estimated"
    return "measured" if source.startswith("measured") else "n/a"


def ok_rows(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] == "ok"]


def mark_best(rows: pd.DataFrame) -> pd.DataFrame:
    """Adds `best`: the ok row of each system and configuration with the
    highest throughput per device."""
    rows = rows.copy()
    rows["best"] = False
    ok = ok_rows(rows).dropna(subset=["throughput_per_device"])
    rows.loc[ok.groupby(GROUP)["throughput_per_device"].idxmax().to_numpy(), "best"] = True
    return rows


def add_ratios(rows: pd.DataFrame, reference_system: str) -> pd.DataFrame:
    """Adds `<figure>_ratio`: the figure over that of the reference system's
    row of the same configuration, batch and node count (empty where it has none)."""
    ref = ok_rows(rows)[ok_rows(rows)["system"] == reference_system].drop_duplicates(MATCH)
    merged = rows[MATCH].merge(ref[MATCH + RATIO_FIGURES + ["energy_source"]], on=MATCH, how="left")
    rows = rows.copy()
    # an energy ratio is estimated where either side's energy is
    rows["reference_energy_source"] = merged["energy_source"].fillna("n/a").to_numpy()
    for figure in RATIO_FIGURES:
        ratio = rows[figure].to_numpy() / merged[figure].to_numpy()
        rows[f"{figure}_ratio"] = ratio
        rows.loc[rows["status"] != "ok", f"{figure}_ratio"] = math.nan
    return rows


def _solution(row: pd.Series, work: float, rate: float, case: str, nodes: float, how: str) -> dict:
    seconds = work / rate
    # the timed window's work per Wh matches the throughput's window (no warm-up)
    timed = not pd.isna(row["timed_work_per_wh"])
    energy_kwh = work / (row["timed_work_per_wh"] if timed else row["work_per_wh"]) / 1000
    kind = energy_kind(row["energy_source"])
    return {
        "system": row["system"], "benchmark": row["benchmark"], "config": row["config"],
        "case": case, "nodes": nodes, "from_devices": row["devices"], "from_nodes": row["nodes"],
        "from_global_batch": row["global_batch"], "job": how, "work": work,
        "estimated_time_h": seconds / 3600, "estimated_energy_kwh": energy_kwh,
        "estimated_action_kwh_h": energy_kwh * seconds / 3600,
        "energy_basis": "timed iterations" if timed else "whole run (warm-up included)",
        "energy_source": row["energy_source"],
        "label": f"{EXTRAPOLATED}; energy {kind}" if kind != "n/a" else EXTRAPOLATED,
    }


def time_and_energy_to_solution(rows: pd.DataFrame, jobs: Jobs) -> pd.DataFrame:
    """Per system and configuration: the job on one node at the best
    configuration's rate per node, and on the node count that finishes
    first (the highest total throughput measured). Energy to solution is
    the job's work over the work per Wh; the action is their product."""
    ok = ok_rows(mark_best(rows) if "best" not in rows else rows)
    out = []
    for _, group in ok.groupby(GROUP, sort=False):
        best = group[group["best"]]
        if best.empty:
            continue
        best = best.iloc[0]
        work, how = jobs.work(best)
        out.append(_solution(best, work, best["throughput_per_node"], "one node (best configuration)",
                             1, how))
        fastest = group.loc[group["throughput"].idxmax()]
        nodes = fastest["nodes"]
        out.append(_solution(fastest, work, fastest["throughput"],
                             f"fastest measured ({nodes:g} node{'' if nodes == 1 else 's'})", nodes, how))
    return pd.DataFrame(out)


def scaling_efficiency(rows: pd.DataFrame) -> pd.DataFrame:
    """Where runs of one system and configuration differ in device count:
    strong efficiency at a fixed global batch, (T/T0)/(d/d0), and weak
    efficiency at a fixed batch per device, (T/d)/(T0/d0), both against the
    run with the fewest devices."""
    ok = ok_rows(rows).copy()
    ok["batch_per_device"] = ok["global_batch"] / ok["devices"]
    out = []
    for kind, key in (("strong", "global_batch"), ("weak", "batch_per_device")):
        for _, group in ok.groupby(GROUP + [key], sort=False):
            if group["devices"].nunique() < 2:
                continue
            group = group.sort_values(["devices", "nodes"])
            base = group.iloc[0]
            for _, row in group.iterrows():
                if kind == "strong":
                    eff = (row["throughput"] / base["throughput"]) / (row["devices"] / base["devices"])
                else:
                    eff = row["throughput_per_device"] / base["throughput_per_device"]
                series = (f"strong at batch {row['global_batch']:g}" if kind == "strong"
                          else f"weak at {row['batch_per_device']:g} per device")
                out.append({"system": row["system"], "benchmark": row["benchmark"], "config": row["config"],
                            "scaling": kind, "series": series, "global_batch": row["global_batch"],
                            "nodes": row["nodes"], "devices": row["devices"], "base_devices": base["devices"],
                            "throughput": row["throughput"], "efficiency": eff})
    return pd.DataFrame(out, columns=["system", "benchmark", "config", "scaling", "series", "global_batch",
                                      "nodes", "devices", "base_devices", "throughput", "efficiency"])
