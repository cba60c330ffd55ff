"""Reference figures with tolerance bands (YAML or CSV), and each measured
row's verdict against them: within, above or below. A reference names a
system tag of platform.xml, a benchmark, a model and one figure; the keys
global_batch, nodes, devices, precision, size and variant narrow the rows
it applies to; model, precision and size (sequence length or image size)
fix the one plot panel it is drawn in. Without global_batch, nodes or
devices it applies to the system's best row for that figure (an "up to"
figure)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import yaml

from caraml import benchmarks
from caraml.compare import CompareError, repeats
from caraml.compare.rows import ran
from caraml.compare.units import numeric
from caraml.login import systems

DEFAULT_FILE = Path(__file__).with_name("references.yaml")
# The figures a reference may name, where more is better (so that "below"
# is a regression), and the field of the row each is: a reference file's
# own names, which files written for earlier versions keep
FIGURES = {"throughput": "per_s", "throughput_per_device": "per_s_per_device",
           "throughput_per_node": "per_s_per_node", "mfu": "mfu", "work_per_wh": "work_per_wh",
           "work_per_node_wh": "work_per_node_wh"}
# Where a reference figure comes from; only a figure read off a paper's
# table or figure is called published. The origin each kind gives.
KINDS = {"paper table/figure": "published", "paper text, derived": "paper text, derived",
         "upstream README example": "upstream README example", "measured by this suite": "measured"}
REQUIRED = ("system", "benchmark", "model", "figure", "value", "lower", "upper", "kind", "source")
# size: the sequence length (LLM) or image size (image) of the configuration
NARROWING = ("precision", "size", "variant", "global_batch", "nodes", "devices")
NUMERIC_NARROWING = ("size", "global_batch", "nodes", "devices")
# what fixes a run's layout: a reference naming none of them is an "up to"
# figure, checked against the best row only, so that the smaller batches of
# a healthy sweep never count as falling below it. size is not among them:
# it names the configuration (sequence length, image size), not a batch.
LAYOUT = ("global_batch", "nodes", "devices")
COLUMNS = [*REQUIRED, *NARROWING, "origin", "low", "high"]
BELOW = "below"  # the verdict of a figure under its band (exit status 3)
SEVERITY = {BELOW: 3, "above": 2, "within": 1}


def _read(path: Path) -> list[dict]:
    try:
        if path.suffix.lower() == ".csv":
            table = pd.read_csv(path, keep_default_na=False, na_values=[""])
            return [{k: v for k, v in entry.items() if not pd.isna(v)} for entry in table.to_dict("records")]
        document = yaml.safe_load(path.read_text())
    except OSError as err:
        raise CompareError(f"{path}: cannot read the reference file ({err.strerror})") from None
    except (yaml.YAMLError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise CompareError(f"{path}: not a YAML or CSV reference file "
                           f"({' '.join(str(err).split())[:200]})") from None
    if not isinstance(document, dict) or not isinstance(document.get("references"), list):
        raise CompareError(f"{path}: no list under the key 'references'; see docs/compare.md for the format")
    return list(document["references"])


def _number(value: object) -> float:
    if isinstance(value, bool):
        return math.nan
    try:
        found = numeric(value)
    except (TypeError, ValueError):
        return math.nan
    return math.nan if found is None else found


def _check(path: Path, index: int, entry: object, known: set[str]) -> dict:
    where = f"{path}: entry {index + 1}"
    if not isinstance(entry, dict):
        raise CompareError(f"{where}: not a mapping of keys to values")
    where += f" ({entry.get('system', '?')} {entry.get('model', '?')} {entry.get('figure', '?')})"
    missing = [k for k in REQUIRED if k not in entry]
    unknown = sorted(set(entry) - set(REQUIRED) - set(NARROWING))
    if missing or unknown:
        raise CompareError(f"{where}: " + "; ".join(
            ([f"missing {' '.join(missing)}"] if missing else []) + ([f"unknown key {' '.join(unknown)}"]
                                                                     if unknown else [])))
    entry = dict(entry)
    if str(entry["system"]) not in known:
        raise CompareError(f"{where}: unknown system {entry['system']!r}; "
                           f"use a tag of platform.xml ({' '.join(sorted(known))})")
    for key, allowed in (("benchmark", benchmarks.names()), ("figure", FIGURES), ("kind", tuple(KINDS))):
        if entry[key] not in allowed:
            raise CompareError(f"{where}: {key} {entry[key]!r} is not one of {'; '.join(allowed)}")
    value, lower, upper = (_number(entry[k]) for k in ("value", "lower", "upper"))
    if not value > 0:
        raise CompareError(f"{where}: malformed band: value must be a positive number, "
                           f"got {entry['value']!r}")
    if not 0 <= lower < 1:
        raise CompareError(f"{where}: malformed band: lower must be a fraction in [0 1) of the value, "
                           f"got {entry['lower']!r}")
    if not upper >= 0:
        raise CompareError(f"{where}: malformed band: upper must be a fraction >= 0 of the value, "
                           f"got {entry['upper']!r}")
    for key in NUMERIC_NARROWING:
        if key in entry and not _number(entry[key]) > 0:
            raise CompareError(f"{where}: {key} must be a positive number, got {entry[key]!r}")
    entry.update(value=value, lower=lower, upper=upper, low=value * (1 - lower), high=value * (1 + upper),
                 system=str(entry["system"]), model=str(entry["model"]), origin=KINDS[entry["kind"]])
    return dict(entry)


def load(path: Path = DEFAULT_FILE) -> pd.DataFrame:
    """The references of a file, checked; one line naming the file, the entry
    and the problem where one is wrong."""
    path = Path(path)
    known = set(systems.load())
    entries = [_check(path, i, e, known) for i, e in enumerate(_read(path))]
    return pd.DataFrame(entries, columns=COLUMNS)


def load_empty() -> pd.DataFrame:
    return pd.DataFrame(columns=COLUMNS)


def in_panel(refs: pd.DataFrame, benchmark: str, model: str, precision: str, size: float) -> pd.DataFrame:
    """The literature references (not this suite's measurements) of exactly
    one configuration: a reference that does not name its model, precision
    and size is drawn in no panel (it still has its verdict and its line in
    the table of references)."""
    if refs.empty:
        return refs
    return refs[(refs["origin"] != "measured") & (refs["benchmark"] == benchmark) & (refs["model"] == model)
                & (refs["precision"] == precision) & (pd.to_numeric(refs["size"]) == size)]


def literature(refs: pd.DataFrame, line: pd.Series, figure: str) -> pd.DataFrame:
    """The literature figures of exactly the configuration of line (in_panel) that give figure;
    a total on one device counts as per device."""
    pub = in_panel(refs, line["benchmark"], line["model"], line["precision"], line["size"])
    named = pub["figure"].map(FIGURES)  # a reference file's names, as the row's fields
    if figure == "per_s_per_device":
        one_device = (named == "per_s") & (pd.to_numeric(pub["devices"]) == 1)
        return pub[(named == figure) | one_device]
    return pub[named == figure]


def verdict(value: float, low: float, high: float) -> str:
    if pd.isna(value):
        return "n/a"
    return BELOW if value < low else "above" if value > high else "within"


def _matching(ok: pd.DataFrame, ref: pd.Series) -> pd.DataFrame:
    rows: pd.DataFrame = ok[(ok["system_name"] == ref["system"]) & (ok["benchmark"] == ref["benchmark"])
                            & (ok["model"] == ref["model"])]
    for key in NARROWING:
        if not pd.isna(ref[key]):
            wanted = _number(ref[key]) if key in NUMERIC_NARROWING else str(ref[key])
            rows = rows[rows[key] == wanted]
    if rows.empty or any(not pd.isna(ref[k]) for k in LAYOUT):
        return rows
    # no batch or layout given: the best of each system label that has the figure
    figure = FIGURES[ref["figure"]]
    having = rows[rows[figure].notna()]
    return having.loc[having.groupby("system")[figure].idxmax().to_numpy()] if not having.empty else having


def _energy_label(row: pd.Series, figure: str) -> str:
    """What an energy figure counts: jpwr's, estimated or measured, or the centre's node meter."""
    if figure == "work_per_node_wh":
        return f"measured, scope {row['node_energy_scope']} ({row['node_energy_source']})"
    if figure == "work_per_wh":
        return f"{'estimated' if row['energy_estimated'] else 'measured'}, scope {row['energy_scope']}"
    return ""


def verdicts(rows: pd.DataFrame, refs: pd.DataFrame) -> pd.DataFrame:
    """One line per (reference, row that ran it applies to); caraml-compare
    gives its measurements only, a ReFrame check the row of its run."""
    ok = ran(rows)
    out = []
    for _, ref in refs.iterrows():
        for index, row in _matching(ok, ref).iterrows():
            value = row[FIGURES[ref["figure"]]]
            out.append({"row": index, "system": row["system"], "system_name": row["system_name"],
                        "benchmark": row["benchmark"], "like": row["like"],
                        "global_batch": row["global_batch"], "nodes": row["nodes"], "devices": row["devices"],
                        "figure": ref["figure"], "measured": value, "reference": ref["value"],
                        "low": ref["low"], "high": ref["high"],
                        "verdict": verdict(value, ref["low"], ref["high"]),
                        "energy": _energy_label(row, ref["figure"]),
                        "origin": ref["origin"], "kind": ref["kind"], "source": ref["source"]})
    return pd.DataFrame(out, columns=["row", "system", "system_name", "benchmark", "like", "global_batch",
                                      "nodes", "devices", "figure", "measured", "reference", "low", "high",
                                      "verdict", "energy", "origin", "kind", "source"])


def row_verdicts(rows: pd.DataFrame, checks: pd.DataFrame, configs: pd.DataFrame) -> pd.Series:
    """Each measured row's worst verdict (below, then above, then within) of
    its configuration, checked on the median of its repeats (configs:
    repeats.collapse, the lines the checks' `row` names); n/a where no
    reference applies."""
    # no check: no measurement, and configs may lack the column
    config_of = configs["config"].to_dict() if not checks.empty else {}
    worst = {config_of[index]: max(group["verdict"], key=lambda v: SEVERITY.get(v, 0))
             for index, group in checks.groupby("row")}
    found = repeats.config_key(rows).map(worst).where(rows["measurement"].astype(bool))
    return found.astype(object).fillna("n/a")
