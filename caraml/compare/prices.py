"""Cost to solution from an optional prices file (YAML): per system, what a
node-hour costs (a price per node-hour, or a node's capital cost spread
over its lifetime), what a kWh of electricity costs and the PUE. The job's
time to solution on one node times the node-hour, plus its energy to
solution times the PUE times the electricity price, is its cost. The
energy is the whole nodes' (node scope, the centre's meter over the job)
where every system costed has it, like for like; otherwise the
accelerators' own (GPU scope, whole run), the one every GPU system has, and
the cost says so and leaves the rest of the node out."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import yaml

from caraml.compare import CompareError, intervals, repeats
from caraml.compare.rows import shown_name
from caraml.compare.units import number

HOURS_PER_YEAR = 365.25 * 24
KEYS = ("system", "node_hour", "capital_per_node", "lifetime_years", "electricity_kwh", "pue")


def _positive(where: str, entry: dict, key: str) -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise CompareError(f"{where}: {key} must be a positive number, got {value!r}")
    return float(value)


def load(path: Path) -> tuple[str, dict[str, dict[str, float]]]:
    """The currency and, per system, its node-hour price, electricity price and PUE."""
    try:
        document = yaml.safe_load(Path(path).read_bytes().decode("utf-8"))
    except OSError as err:
        raise CompareError(f"{path}: cannot read the prices file ({err.strerror})") from None
    except UnicodeDecodeError as err:  # e.g. a spreadsheet's file in place of its YAML
        raise CompareError(f"{path}: not a text file (byte {err.object[err.start]:#04x} at offset "
                           f"{err.start} is no UTF-8): the prices file is YAML text; see "
                           f"docs/compare.md for the format") from None
    except yaml.YAMLError as err:
        raise CompareError(f"{path}: not a YAML prices file ({' '.join(str(err).split())[:200]})") from None
    if not isinstance(document, dict) or not isinstance(document.get("prices"), list):
        raise CompareError(f"{path}: no list under the key 'prices'; see docs/compare.md for the format")
    currency = str(document.get("currency", "")).strip()
    if not currency:
        raise CompareError(f"{path}: no currency (a top-level key 'currency', e.g. EUR)")
    out = {}
    for index, entry in enumerate(document["prices"]):
        where = f"{path}: entry {index + 1}"
        if not isinstance(entry, dict) or "system" not in entry:
            raise CompareError(f"{where}: a mapping with a system and its prices")
        where += f" ({entry['system']})"
        unknown = sorted(set(entry) - set(KEYS))
        if unknown:
            raise CompareError(f"{where}: unknown key {' '.join(unknown)}; the keys are {' '.join(KEYS)}")
        if ("node_hour" in entry) == ("capital_per_node" in entry):
            raise CompareError(f"{where}: give node_hour, or capital_per_node with lifetime_years, not both")
        node_hour = (_positive(where, entry, "node_hour") if "node_hour" in entry else
                     _positive(where, entry, "capital_per_node")
                     / (_positive(where, entry, "lifetime_years") * HOURS_PER_YEAR))
        pue = _positive(where, entry, "pue")
        if pue < 1:
            raise CompareError(f"{where}: pue must be at least 1 (the facility's power over the IT "
                               f"equipment's), got {entry['pue']!r}")
        out[str(entry["system"])] = {"node_hour": node_hour, "pue": pue,
                                     "electricity_kwh": _positive(where, entry, "electricity_kwh")}
    return currency, out


def unused(path: Path, prices: dict[str, dict[str, float]], systems: list[str]) -> str:
    """One line naming the prices file's systems that are not in the comparison (a file may
    well list more systems than one comparison holds); empty where it names none such."""
    extra = [s for s in prices if s not in systems]
    if not extra:
        return ""
    return (f"{path}: prices of {', '.join(extra)} unused: no such system in this comparison "
            f"({', '.join(systems)}); check the spelling where one was meant")


# the energy a cost counts: (its scope, the solution table's column), whole nodes first
SCOPES = (("node", "node_energy_kwh"), ("gpu", "gpu_energy_kwh"))
COLUMNS = ["system", "node_hours_cost", "electricity_cost", "cost", "energy_scope", "energy_estimated",
           "electricity_missing"]


def cost(solution: pd.DataFrame, prices: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Per system of the solution table (the job on one node): the cost of
    its node-hours and of its electricity, and their sum, cheapest first;
    a system without prices is left out. Where every system has whole-node
    energy the electricity counts it, else the accelerators' (gpu scope);
    a system without that energy keeps its node-hours' cost, its
    electricity marked missing with why (and no sum: it is listed after
    the others, never the cheapest)."""
    costed = solution[solution["representative"] & solution["system"].isin(list(prices))] \
        if not solution.empty else solution
    scope, column = next(((scope, column) for scope, column in SCOPES
                          if not costed.empty and costed[column].notna().all()), SCOPES[-1])
    lines = []
    for _, row in costed.iterrows():
        price = prices[row["system"]]
        nodes = row["time_h"] * row["nodes"] * price["node_hour"]
        power = row[column] * price["pue"] * price["electricity_kwh"]
        missing = "" if pd.notna(power) else (
            f"electricity cost missing: {row['system']} has no accelerator-only (gpu scope) energy; its "
            f"energy scope is {row['energy_scope']}")
        lines.append({"system": row["system"], "node_hours_cost": nodes, "electricity_cost": power,
                      "cost": nodes + power, "energy_scope": scope,
                      "energy_estimated": scope == "gpu" and bool(row["energy_estimated"]),
                      "electricity_missing": missing})
    table = pd.DataFrame(lines, columns=COLUMNS)
    return table.sort_values(["cost", "node_hours_cost"], kind="stable", na_position="last") \
        .reset_index(drop=True) if not table.empty else table


def unpriced(solution: pd.DataFrame, prices: dict[str, dict[str, float]]) -> list[str]:
    return [s for s in dict.fromkeys(solution["system"]) if s not in prices] if not solution.empty else []


def _cost_side(cost_line: pd.Series, line: pd.Series) -> intervals.Side:
    """A system's cost as each of its runs gives it: node-hours scale with
    1/throughput, electricity with 1/work per Wh of the scope the cost
    counts, both of the same run."""
    per_wh = "work_per_node_wh" if cost_line["energy_scope"] == "node" else "work_per_wh_gpu"
    runs = zip(repeats.run_values(line, "per_s_per_node"), repeats.run_values(line, per_wh))
    costs = tuple(cost_line["node_hours_cost"] * line["per_s_per_node"] / rate
                  + cost_line["electricity_cost"] * line[per_wh] / work_per_wh for rate, work_per_wh in runs)
    return intervals.Side(str(cost_line["system"]), costs, repeats.floor(line))


def cheapest(costs: pd.DataFrame, lines: pd.DataFrame, currency: str) -> tuple[str, dict] | None:
    """The sentence naming the cheapest system to solution with its margin
    over the runner-up (the runner-up's cost over its own, with the 95 %
    interval), and its figures for decision.json; None without a full cost."""
    full = costs.dropna(subset=["cost"])
    if full.empty:
        return None
    best = full.iloc[0]
    runner = full.iloc[1] if len(full) > 1 else None
    ratio = runner["cost"] / best["cost"] if runner is not None else math.nan
    by_system = lines.set_index("system")

    def named(system: str) -> str:
        return shown_name({"system": system, "audit": by_system.loc[system].get("audit")})

    runs = int(by_system.loc[best["system"], "runs"])
    who = repeats.leader(named(best["system"]), None if runner is None else named(runner["system"]), ratio)
    said = (f"Cheapest to solution on one node: {who}, {number(best['cost'])} {currency} "
            f"(node-hours {number(best['node_hours_cost'])} + electricity {number(best['electricity_cost'])}"
            f"{', energy estimated' if best['energy_estimated'] else ''}; an estimate from "
            f"{runs} run{'' if runs == 1 else 's'})")
    figures = {"ranking": "Cheapest to solution", "best": best["system"], "value": best["cost"],
               "unit": currency, "runs": runs, "runner_up": None,
               "margin": math.nan, "low": math.nan, "high": math.nan, "significant": None, "no_interval": "",
               "tie": False, "runs_to_separate": None}
    if runner is None:
        return f"{said}; the only system with a full cost.", figures
    top, bottom = (_cost_side(c, by_system.loc[c["system"]]) for c in (runner, best))
    interval = intervals.ratio_interval(top, bottom)
    separate = intervals.runs_to_separate(top, bottom, ratio)
    figures.update(runner_up=runner["system"], margin=ratio, low=interval[0], high=interval[1],
                   significant=repeats.significant(interval[0], interval[1]), no_interval=interval[2],
                   tie=intervals.tie(ratio), runs_to_separate=separate)
    return (f"{said}; the runner-up {named(runner['system'])}, its cost over the cheapest: "
            f"{repeats.ratio_words(ratio, *interval, separate)}.", figures)
