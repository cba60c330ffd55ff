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

from pathlib import Path

import pandas as pd
import yaml

from caraml.compare import CompareError

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
        out[str(entry["system"])] = {"node_hour": node_hour,
                                     "electricity_kwh": _positive(where, entry, "electricity_kwh"),
                                     "pue": _positive(where, entry, "pue")}
    return currency, out


# the energy a cost counts: (its scope, the solution table's column), whole nodes first
SCOPES = (("node", "node_energy_kwh"), ("gpu", "gpu_energy_kwh"))


def cost(solution: pd.DataFrame, prices: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Per system of the solution table (the job on one node): the cost of
    its node-hours and of its electricity, and their sum, cheapest first;
    a system without prices, or without the energy the others' electricity
    counts, is left out."""
    costed = solution[[system in prices and not isinstance(time, str)
                       for system, time in zip(solution["system"], solution["time_h"])]] \
        if not solution.empty else solution
    scope, column = next(((scope, column) for scope, column in SCOPES
                          if not costed.empty and costed[column].notna().all()), SCOPES[-1])
    lines = []
    for _, row in costed.iterrows():
        price = prices[row["system"]]
        if pd.isna(row[column]):
            continue
        nodes = row["time_h"] * row["nodes"] * price["node_hour"]
        power = row[column] * price["pue"] * price["electricity_kwh"]
        lines.append({"system": row["system"], "node_hours_cost": nodes, "electricity_cost": power,
                      "cost": nodes + power, "energy_scope": scope,
                      "energy_estimated": scope == "gpu" and bool(row["energy_estimated"])})
    table = pd.DataFrame(lines, columns=["system", "node_hours_cost", "electricity_cost", "cost",
                                         "energy_scope", "energy_estimated"])
    return table.sort_values("cost", kind="stable").reset_index(drop=True) if not table.empty else table


def unpriced(solution: pd.DataFrame, prices: dict[str, dict[str, float]]) -> list[str]:
    return [s for s in dict.fromkeys(solution["system"]) if s not in prices] if not solution.empty else []

