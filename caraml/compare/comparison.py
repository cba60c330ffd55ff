"""The comparison of runs across systems, computed as one object: the rows
(caraml/compare/rows.py) with each system's best, the ratios to the
reference system, the checks against reference bands, the headline, time
and energy to solution, scaling, the decisions per benchmark with their
costs, the power-limit sweeps, what is no measurement, and the exit
status. caraml/compare/output.py writes it; nothing here writes a file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from caraml.compare import (
    CompareError,
    decision,
    drops,
    figures,
    frontier,
    left_out,
    prices,
    reference,
    repeats,
    rows,
)
from caraml.compare.jobs import Jobs
from caraml.compare.left_out import Item

SYSTEM_FAILED, BAD_INPUT, BELOW_BAND, DROPPED = 1, 2, 3, 4


@dataclass
class Decided:
    """One benchmark's decision, with its cost to solution where prices were given."""

    decision: decision.Decision
    costs: pd.DataFrame
    unpriced: list[str]  # the systems of its solution without a price


@dataclass
class Comparison:
    table: pd.DataFrame  # the rows that rank each system, with best, verdicts and ratios
    every: pd.DataFrame  # those and a sweep's capped points
    reference_system: str
    refs: pd.DataFrame
    checks: pd.DataFrame  # each reference band checked against the rows it applies to
    head: pd.DataFrame
    refused: list[figures.Refusal]  # each ratio refused, with its reason
    solutions: pd.DataFrame
    scaling: pd.DataFrame
    failed_systems: list[str]  # one line per system and benchmark without a measurement
    failed_rows: pd.DataFrame  # failed, not run, or no measurement
    sweeps: list[frontier.Sweep]
    decided: list[Decided]
    currency: str
    priced: bool
    drops: list[str]  # each system's latest figure beyond its own earlier runs' spread, in one line
    unused_prices: str  # the prices file's systems that are not in the comparison, in one line
    left_out: list[Item]  # every run and system the decisions leave out, and why (the audit's states too)
    contestable: list[Item]  # what a vendor may contest in what they rank
    apart: list[str]  # each system whose rows came from several machines or builds (not pooled), in one line

    @property
    def systems(self) -> list[str]:
        return list(dict.fromkeys(self.table["system"]))

    @property
    def below(self) -> pd.DataFrame:
        return self.checks[self.checks["verdict"] == reference.BELOW]

    @property
    def status(self) -> int:
        """0 every system measured, 1 a system has a benchmark without a
        measured row, 4 a system's latest figure dropped below its own
        earlier runs, 3 a figure below its reference band (3 wins over 4, 4 over 1)."""
        return BELOW_BAND if not self.below.empty else DROPPED if self.drops else \
            SYSTEM_FAILED if self.failed_systems else 0

    @property
    def benchmarks(self) -> list[str]:
        return list(dict.fromkeys(b for b in self.table["benchmark"] if b != "n/a"))

    def summary(self) -> list[str]:
        said = {0: "every system measured, no figure below its band.",
                SYSTEM_FAILED: "a system has a benchmark without a measured row (listed below).",
                BELOW_BAND: "a figure is below its reference band.",
                DROPPED: "a system's latest figure is below its own earlier runs (named above)."}
        return [f"{len(self.systems)} systems: {', '.join(self.systems)}; reference system "
                f"{self.reference_system}.",
                f"{len(rows.measured(self.table))} measured rows, {len(self.failed_rows)} not measurements, "
                f"{len(self.failed_systems)} benchmarks of a system without a measurement, "
                f"{len(self.below)} figures below their band.",
                f"Exit status {self.status}: {said[self.status]}"]


def _reference_system(table: pd.DataFrame, wanted: str | None) -> str:
    # rows that are no measurements only: the report still shows them, with no ratio to anything
    systems = list(dict.fromkeys(rows.measured(table)["system"])) or \
        list(dict.fromkeys(rows.ran(table)["system"]))
    if wanted is None:
        return str(systems[0])
    if wanted not in systems:
        raise CompareError(f"--reference-system {wanted}: no measured row of that system given "
                           f"({' '.join(systems)})")
    return wanted


def _failed_benchmarks(table: pd.DataFrame) -> list[str]:
    """One line per system and benchmark it ran without a measured row, with its causes."""
    lines = []
    for (system, benchmark), group in table.groupby(["system", "benchmark"], sort=False):
        if rows.measured(group).empty:
            causes = "; ".join(dict.fromkeys(rows.cause(line) for _, line in group.iterrows()))
            name = system if benchmark == "n/a" else f"{system} {benchmark}"
            lines.append(f"{name}: no measured row ({len(group)} rows: {causes})")
    return lines


def _decided(table: pd.DataFrame, head: pd.DataFrame, solutions: pd.DataFrame, jobs: Jobs, ref_system: str,
             price_list: dict | None, currency: str) -> list[Decided]:
    """Each benchmark's decision, its cost to solution and the sentence naming the cheapest where priced."""
    out = []
    for chosen in decision.decide(table, head, solutions, jobs, ref_system):
        if price_list is None:
            out.append(Decided(chosen, pd.DataFrame(), []))
            continue
        costs = prices.cost(chosen.solution, price_list)
        cheapest = prices.cheapest(costs, chosen.ranked["per_s_per_node"], currency)
        if cheapest is not None:
            chosen.leaders.append(cheapest[0])
            chosen.margins.append(cheapest[1])
        chosen.unranked += [f"{line['system']}: {line['electricity_missing']}"
                            for line in costs.to_dict("records") if line["electricity_missing"]]
        out.append(Decided(chosen, costs, prices.unpriced(chosen.solution, price_list)))
    return out


def compute(runs: list[str], *, all_runs: bool, reference_system: str | None, refs: pd.DataFrame,
            prices_file: Path | None, jobs: Jobs, history: pd.DataFrame | None = None,
            accept_unaudited: bool = False) -> Comparison:
    """The whole comparison of the runs and bundles the arguments name."""
    loaded = rows.load(runs, all_runs, accept_unaudited)
    rows.check_comparable(loaded)
    # each system ranks by its run at the devices' own limit; the sweep's capped points get their section
    table, capped = rows.at_default_limit(loaded)
    if rows.ran(table).empty:
        raise CompareError("only power-capped rows ran: the comparison ranks each system by its run at the "
                           "devices' own limit; add the sweep's 'default' point or a run without a sweep")
    ref_system = _reference_system(table, reference_system)
    currency, price_list = prices.load(prices_file) if prices_file else ("", {})
    table = figures.mark_best(table)
    # each configuration's median of its repeats is checked; no measurement is checked against a band
    configs = repeats.collapse(rows.measured(table))
    checks = reference.verdicts(configs, refs)
    table["verdict"] = reference.row_verdicts(table, checks, configs)
    table = figures.add_ratios(table, ref_system)
    head, refused = figures.headline(table, ref_system)
    solutions = figures.time_and_energy_to_solution(table, jobs)
    every = pd.concat([table, capped], ignore_index=True)
    decided = _decided(table, head, solutions, jobs, ref_system, price_list if prices_file else None,
                       currency)
    systems = list(dict.fromkeys(table["system"]))
    unpriced = list(dict.fromkeys(s for d in decided for s in d.unpriced))
    return Comparison(
        table=table, every=every, reference_system=ref_system, refs=refs, checks=checks, head=head,
        refused=refused, solutions=solutions, scaling=figures.scaling_efficiency(table),
        failed_systems=_failed_benchmarks(table),
        failed_rows=every.drop(index=rows.measured(every).index),  # failed, not run, or too short
        sweeps=frontier.sweeps(loaded, jobs), decided=decided, currency=currency,
        priced=prices_file is not None,
        drops=drops.against_history(head, every, history) if history is not None else [],
        unused_prices=prices.unused(prices_file, price_list, systems) if prices_file else "",
        left_out=[*left_out.left_out_rows(every), *left_out.unpriced(unpriced, list(price_list), systems),
                  *(i for d in decided for i in left_out.electricity_missing(d.costs, d.decision.benchmark))],
        contestable=[item for d in decided for item in left_out.contestable(d.decision, table)],
        apart=rows.apart(every))
