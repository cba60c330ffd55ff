"""What a comparison's decision leaves out, and what a vendor may contest
in what it ranks: two lists of items, each naming what (a run, a row, a
system) and why, that summary.md, decision.json, the report's first screen
and stdout all give (caraml/compare/output.py).

Left out: every row the audit refused (each rule it breaks, with its
evidence) and every unaudited row (no raw evidence: ranked only where
the comparison accepts unaudited rows, and said so), every row that is
no measurement by its own verdict (which run, and the verdict's why: a
repeat whose loss went nan, a run too short, a failure), each found by a
row rule (ROW_RULES: a rule of its own joins the list by adding one), and
every system the cost to solution could not price (absent from the prices
file, with the file's close spelling where it has one, or its electricity
missing).

May contest: what the ranking rests on that a vendor could dispute though
every rule passed: a figure from a single run, a timed window within 5 %
of the verdict's minimum, a row of another commit than the others' (or
with uncommitted changes), energy that jpwr estimated."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from caraml.audit.decide import REFUSED, UNAUDITED
from caraml.compare import repeats, rows
from caraml.compare.decision import GPU_FIGURE, Decision
from caraml.compare.units import NA, number
from caraml.row.verdict import MIN_TIMED_ITERATIONS, MIN_TIMED_SECONDS

# kinds of what is left out
REFUSED_ROW, UNAUDITED_ROW, EXCLUDED_RUN = "refused row", "unaudited row", "excluded run"
UNPRICED = "unpriced system"
# kinds of what a vendor may contest
SINGLE_RUN = "single run"
SHORT_WINDOW = "timed window near the minimum"
OTHER_COMMIT = "another commit"
ESTIMATED = "estimated energy"
# how alike a prices entry's name and a system's must be (difflib's ratio, case aside) to be named
# as its likely misspelling: GH-200 for GH200 (0.91) and A1000 for A100 (0.89), not GH-200 for H100 (0.6)
CLOSE = 0.8
# a timed window within this share above the verdict's minimum (iterations or seconds) may be contested
NEAR_MINIMUM = 0.05


@dataclass(frozen=True)
class Item:
    """One thing left out of a decision, or one a vendor may contest: what and why."""

    kind: str
    what: str  # a system, or a row's system, configuration, batch (and power limit)
    why: str
    system: str
    benchmark: str = ""  # "" where it concerns the comparison as a whole
    configuration: str = ""  # the row's like-for-like configuration; "" for a system
    run: str = ""  # the row's run (run_name); "" for a system
    row_file: str = ""  # the row behind it; "" for a system

    def record(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class RowRule:
    """A reason rows are left out of every ranking: which rows it selects, and why each."""

    kind: str
    selects: Callable[[pd.DataFrame], pd.Series]  # one flag per row
    why: Callable[[pd.Series], str]


def _unaudited(line: pd.Series) -> str:
    """What an unaudited row lacks (its own folder named so, as row_file has it: one why for many
    rows), and whether the comparison ranks it."""
    ranked = "; ranked, each sentence naming it unaudited (--accept-unaudited)" if line["measurement"] \
        else "; not ranked: caraml-compare --accept-unaudited ranks it" if line["audit_excluded"] else ""
    lacks = str(line["audit_why"]).replace(str(Path(str(line["row_file"])).parent), "its work folder")
    return f"{lacks}{ranked}"


def _audit(table: pd.DataFrame, state: str) -> pd.Series:
    return table["audit"] == state


def _own_verdict(table: pd.DataFrame) -> pd.Series:
    """The rows that are no measurement by their own verdict, not by their audit."""
    return ~table["measurement"].astype(bool) & ~table["audit_excluded"].astype(bool)


ROW_RULES: list[RowRule] = [
    RowRule(REFUSED_ROW, lambda table: _audit(table, REFUSED), lambda line: str(line["audit_why"])),
    RowRule(UNAUDITED_ROW, lambda table: _audit(table, UNAUDITED), _unaudited),
    RowRule(EXCLUDED_RUN, _own_verdict, rows.cause),
]


def row_words(line: pd.Series) -> str:
    """A row's configuration in words: system, configuration, batch and power limit (its
    benchmark where the row has none, as a failed run's line)."""
    parts = [str(line["system"])]
    parts += [str(line["like"])] if line["model"] != NA else []
    parts += [f"batch {line['global_batch']:g}"] if pd.notna(line["global_batch"]) else []
    parts += [f"at power limit {line['power_limit']}"] if line["limit_swept"] else []
    return " ".join(parts)


def _of_row(kind: str, line: pd.Series, why: str) -> Item:
    benchmark = str(line["benchmark"])
    return Item(kind, row_words(line), why, str(line["system"]), "" if benchmark == NA else benchmark,
                str(line["like"]), rows.run_name(line), str(line["row_file"]))


def left_out_rows(every: pd.DataFrame, rules: Iterable[RowRule] = ROW_RULES) -> list[Item]:
    """Each row each rule leaves out, in the rules' order and the table's."""
    return [_of_row(rule.kind, line, rule.why(line)) for rule in rules
            for _, line in every[rule.selects(every)].iterrows()]


def unpriced(systems: list[str], price_names: list[str], comparison_systems: list[str]) -> list[Item]:
    """Each system without a price and why: absent from the prices file, and the
    close spelling of a price entry that names no system here, where the file has one."""
    spare = {name.lower(): name for name in price_names if name not in comparison_systems}
    out = []
    for system in systems:
        close = [spare[n] for n in difflib.get_close_matches(system.lower(), list(spare), n=1, cutoff=CLOSE)]
        why = "absent from the prices file" + (f"; its entry {close[0]!r}, which names no system here, may "
                                               "be a misspelling of it" if close else "")
        out.append(Item(UNPRICED, system, why, system))
    return out


def electricity_missing(costs: pd.DataFrame, benchmark: str) -> list[Item]:
    """Each costed system without the electricity's cost: no full cost, never the cheapest."""
    return [Item(UNPRICED, str(system), f"no full cost: {missing}; its node-hours' cost is listed, it is "
                 "never the cheapest", str(system), benchmark)
            for system, missing in zip(costs["system"], costs["electricity_missing"]) if missing] \
        if not costs.empty else []


def _near_minimum(line: pd.Series) -> str:
    """Why the row's timed window is near the verdict's minimum; empty where it is not."""
    iterations, seconds = line["timed_iterations"], line["timed_s"]
    near = (pd.notna(iterations) and iterations < MIN_TIMED_ITERATIONS * (1 + NEAR_MINIMUM)) or \
        (pd.notna(seconds) and seconds < MIN_TIMED_SECONDS * (1 + NEAR_MINIMUM))
    if not near:
        return ""
    return (f"timed {iterations:g} iterations in {number(seconds, 's')}, within {NEAR_MINIMUM * 100:g} % of "
            f"the verdict's minimum ({MIN_TIMED_ITERATIONS} iterations and {MIN_TIMED_SECONDS:g} s)")


def _commit(line: pd.Series) -> str:
    clean = line["clean"]
    return f"{line['commit']}{' with uncommitted changes' if pd.notna(clean) and not clean else ''}"


def contestable(decision: Decision, table: pd.DataFrame) -> list[Item]:
    """What a vendor may contest in one decision: its ranked lines
    (repeats.collapse's, with `config`) and the runs behind them, the
    measured rows of table of their configuration."""
    ranked = pd.concat(list(decision.ranked.values())).drop_duplicates("config") if decision.ranked \
        else pd.DataFrame()
    if ranked.empty:
        return []
    estimated = set(decision.ranked[GPU_FIGURE]["config"]) if GPU_FIGURE in decision.ranked else set()
    done = rows.measured(table)
    behind = done[repeats.config_key(done).isin(set(ranked["config"]))]
    out = []
    for _, line in ranked.iterrows():
        what = f"{line['system']} batch {line['global_batch']:g}"  # the decision names its configuration
        if int(line["runs"]) < 2:
            out.append(Item(SINGLE_RUN, what, "its figures rest on 1 run: nothing shows how they vary from "
                            "run to run (run each configuration three times, the repeat tag)", line["system"],
                            line["benchmark"], line["like"], rows.run_name(line), str(line["row_file"])))
        if line["energy_estimated"] and line["config"] in estimated:
            out.append(Item(ESTIMATED, what, "its energy is jpwr's estimate (no power sensor read): the "
                            "energy ranking and the cost to solution rest on it",
                            line["system"], line["benchmark"], line["like"]))
    out += [_of_row(SHORT_WINDOW, line, why) for _, line in behind.iterrows() if (why := _near_minimum(line))]
    commits = Counter(_commit(line) for _, line in behind.iterrows() if line["commit"] != NA)
    if len(commits) > 1:
        usual, count = commits.most_common(1)[0]
        out += [_of_row(OTHER_COMMIT, line, f"commit {_commit(line)}, where {count} of the {commits.total()} "
                        f"rows ranked are of {usual}") for _, line in behind.iterrows()
                if line["commit"] != NA and _commit(line) != usual]
    return out


def grouped(items: list[Item]) -> list[str]:
    """The items as the first screen says them: one line per benchmark, kind and why, naming
    each what with its runs."""
    lines: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for item in items:
        runs = lines.setdefault((item.benchmark, item.kind, item.why), {}).setdefault(item.what, [])
        runs += [item.run] if item.run else []
    return [f"{f'{benchmark}: ' if benchmark else ''}{kind}: "
            + "; ".join(what + (f" (run{'s' if len(runs) > 1 else ''} {', '.join(runs)})" if runs else "")
                        for what, runs in whats.items()) + f": {why}"
            for (benchmark, kind, why), whats in lines.items()]
