"""The decision a committee defends (tests/compare/rowfixtures.py
repeated_committee): twelve systems of three runs each ranked on their
median with min-max and a seeded 95 % interval on every margin, the
sentences of the first screen the same in report.html, summary.md,
decision.json and on stdout, the reference system's drop against its own
earlier run named with exit status 4, a healthy batch sweep without a false
alarm, a row that is no measurement never ranked, and the cost of a system
without accelerator-only energy kept with its electricity marked missing."""

from __future__ import annotations

import contextlib
import html
import io
import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from caraml.compare import comparison, drops, intervals, repeats
from tests.compare import rowfixtures as fx


@pytest.fixture(scope="module")
def decided(tmp_path_factory):
    root = tmp_path_factory.mktemp("repeated")
    db = root / "history.sqlite"
    args = fx.repeated_committee(root, db)
    out = root / "out"
    prices = fx.committee_prices(root / "prices.yaml")
    argv = [*args, "--all-runs", "--out", str(out), "--reference-system", "A100", "--check-history", str(db),
            "--prices", str(prices)]
    return argv, out


@pytest.fixture(scope="module")
def ran(decided):
    argv, out = decided
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = fx.compare(argv)
    return status, out, printed.getvalue(), json.loads((out / "decision.json").read_text())


def test_the_reference_systems_drop_against_its_own_history_is_named_first_with_exit_status_4(ran):
    status, out, printed, record = ran
    assert status == comparison.DROPPED == record["exit_status"]
    said = ("A100 15 % below its run of 2026-11-20 (llm 800M bf16 seq 2048, batch 512, 19,400 against 22,800 "
            "tokens/s per GPU); ratios use the latest run")
    assert record["drops"] == [said] and f"DROP: {said}" in printed
    page = (out / "report.html").read_text()
    assert page.index(html.escape(said)) < page.index('id="decision-llm"')
    assert "BELOW BAND" not in printed  # GH200's healthy sweep: its reference applies to its best batch only


def test_the_first_screen_decision_json_summary_and_stdout_say_the_same_sentences(ran):
    _, out, printed, record = ran
    page = (out / "report.html").read_text()
    summary = (out / "summary.md").read_text()
    for bench in record["benchmarks"]:
        section = page.split(f'id="decision-{bench["benchmark"]}"')[1].split("</section>")[0]
        shown = [html.unescape(line) for line in re.findall(r"<li>(.*?)</li>", section)]
        assert shown == bench["sentences"] and len(shown) == 4  # node, package, energy, cost
        for line in bench["sentences"]:
            assert f"- {line}" in summary and f"decision {bench['benchmark']}: {line}" in printed
        # the caveats right under the sentences, before the charts
        for caveat in bench["caveats"]:
            assert section.index(html.escape(caveat)) < section.index("<figure>")
        for figures, line in zip(bench["figures"], bench["sentences"]):
            # rows written by hand: every system a sentence names is unaudited, and it says so
            runner_up = figures["runner_up"] and f"{figures['runner_up']} (unaudited)"
            leader = repeats.leader(f"{figures['best']} (unaudited)", runner_up, figures["margin"])
            assert line.startswith(f"{figures['ranking']}") and f": {leader}," in line
            if figures["runner_up"] is not None:
                assert figures["runner_up"] in line and f"{figures['margin']:.2f}x" in line
                no_difference = figures["low"] <= 1 <= figures["high"]
                assert figures["tie"] is intervals.tie(figures["margin"])
                assert ("a tie" in line) is figures["tie"]
                assert ("no significant difference: " in line) == (no_difference and not figures["tie"])
                assert figures["significant"] is (not no_difference)


def test_repeats_rank_on_their_median_with_min_max_and_an_interval_on_the_margin(ran):
    _, _, _, record = ran
    llm = next(b for b in record["benchmarks"] if b["benchmark"] == "llm")
    node = llm["sentences"][0]
    # GH200 4 x 47,505 per node, its runs 0.985x and 1.015x of that; JUPITER 4 x 45,000
    assert node.startswith("Fastest per node: GH200 (unaudited), 190,000 tokens/s per node (median of 3 "
                           "runs, 187,000–193,000); over JUPITER (unaudited) 1.06x, 95 % CI ")
    margin = llm["figures"][0]
    assert margin["margin"] == pytest.approx(47505 / 45000)
    # Welch's t on the runs' logarithms: both sides' runs spread alike (factors 1, 0.985, 1.015), 4 degrees of
    # freedom, the interval centred on the ratio
    half = stats.t.ppf(0.975, 4) * np.std(np.log([1, 0.985, 1.015]), ddof=1) * math.sqrt(2 / 3)
    assert (margin["low"], margin["high"]) == pytest.approx((47505 / 45000 / math.exp(half),
                                                             47505 / 45000 * math.exp(half)), rel=1e-4)
    # the ratio to the reference system, with its interval
    reference = 47505 / 19390
    assert node.endswith(f"; 2.45x A100, 95 % CI {reference / math.exp(half):.2f}–"
                         f"{reference * math.exp(half):.2f}.")
    assert margin["reference"] == pytest.approx(reference) and margin["reference_low"] < reference
    energy = llm["sentences"][2]
    assert energy.startswith("Most energy-efficient, like for like: GH200 (unaudited) ties with WAIH100 "
                             "(unaudited), ")
    assert "over WAIH100 (unaudited) 1.02x, a tie (within 2 %), 95 % CI 0.98–1.05; 1.55x A100, 95 % CI " \
        in energy


def test_a_row_that_is_no_measurement_is_never_ranked_and_said_under_the_sentences(ran):
    _, out, printed, record = ran
    llm = next(b for b in record["benchmarks"] if b["benchmark"] == "llm")
    assert not any("MI300X" in line for line in llm["sentences"])
    assert any(line.startswith("MI300X: not ranked (not a measurement (4 timed iterations")
               for line in llm["caveats"])
    # H100's diverged batch 1024 (90,000 tokens/s per GPU, loss nan) leads nothing and is said so
    assert "not a measurement: H100 llm 800M bf16 seq 2048: loss nan at iteration 3" in printed
    table = pd.read_csv(out / "comparison.csv", keep_default_na=False, na_values=[""])
    diverged = table[(table["system"] == "H100") & (table["benchmark"] == "llm")
                     & (table["global_batch"] == 1024)]
    assert len(diverged) == 3 and not diverged["measurement"].any() and not diverged["best"].any()
    assert all(pd.isna(diverged["per_s_per_device_ratio"]))


def test_a_system_without_accelerator_energy_keeps_its_node_hours_and_a_misspelt_price_is_named(ran):
    _, out, printed, record = ran
    cost = pd.read_csv(out / "cost_llm_800M_bf16_seq_2048.csv").set_index("system")
    assert cost.loc["JUPITER", "node_hours_cost"] > 0 and pd.isna(cost.loc["JUPITER", "electricity_cost"])
    assert cost.index[-1] == "JUPITER"  # no full cost: listed after the others, never the cheapest
    llm = next(b for b in record["benchmarks"] if b["benchmark"] == "llm")
    assert ("JUPITER: electricity cost missing: JUPITER has no accelerator-only (gpu scope) energy; "
            "its energy scope is module") in llm["caveats"]
    assert "prices of A1000 unused: no such system in this comparison" in record["unused_prices"]
    assert f"unused prices: {record['unused_prices']}" in printed


def test_the_interval_says_no_significant_difference_where_it_holds_1_and_why_there_is_none():
    top = {"system": "X", "runs": 3, "per_s_runs": (100.0, 103.0, 98.0)}
    bottom = {"system": "Y", "runs": 3, "per_s_runs": (99.0, 101.0, 100.0)}
    first = repeats.interval(top, bottom, "per_s")
    assert repeats.interval(top, bottom, "per_s") == first and first[0] <= 1 <= first[1]
    assert repeats.ratio_words(1.04, 0.97, 1.07, "", 9) == \
        "no significant difference: 1.04x, 95 % CI 0.97–1.07; 9 runs a side would separate 4 %"
    assert repeats.ratio_words(1.2, 1.1, 1.3) == "1.20x, 95 % CI 1.10–1.30"
    one = {"system": "Z", "runs": 1, "per_s": 100.0}
    low, high, why = repeats.interval(one, bottom, "per_s")
    assert np.isnan(low) and why == "Z rests on 1 run, whose row records no spread of its timed iterations"
    assert repeats.spread(one, "per_s") == "1 run"
    # one run whose row records its iterations' spread: Y's spread from run to run stands for Z's
    timed = {**one, "timed_iterations": 50, "time_per_iteration_s": 1.0, "time_per_iteration_p10_s": 0.9,
             "time_per_iteration_p90_s": 1.1}
    low, high, why = repeats.interval(timed, bottom, "per_s")
    assert why == "" and low < 1 < high
    low, high, why = repeats.interval(timed, {**timed, "system": "W", "per_s": 50.0}, "per_s")
    assert np.isnan(low) and why == "Z and W have 1 run each"


@pytest.mark.parametrize("latest, earlier, dropped", [
    (85.0, [100.0], 0.15), (96.0, [100.0], None),  # within the noise floor of 5 %
    (88.0, [100.0, 80.0, 90.0], None),  # within the earlier runs' own spread
    (70.0, [100.0, 95.0, 97.0], 0.278), (float("nan"), [100.0], None), (85.0, [], None)])
def test_a_drop_counts_only_beyond_the_earlier_runs_spread(latest, earlier, dropped):
    share = drops.drop(latest, earlier)
    assert share == (pytest.approx(dropped, abs=1e-3) if dropped is not None else None)
