"""The twelve systems a committee compares (tests/compare/rowfixtures.py
committee()): a row that is no measurement (a smoke run) is shown, marked
and never ranked, divided or
extrapolated; a system with a benchmark without a measured row makes the
command exit 1 naming both; no time or energy in milli-units and no
duplicate time-to-solution line; references only in the panel of their
exact configuration, each with its source kind."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from caraml.compare import comparison, decision, figures, reference, rows
from caraml.compare.jobs import Jobs
from caraml.row import verdict
from tests.compare import rowfixtures as fx


@pytest.fixture(scope="module")
def committee(tmp_path_factory):
    root = tmp_path_factory.mktemp("committee")
    out = root / "out"
    args = fx.committee(root)
    status = fx.compare([*args, "--out", str(out), "--reference-system", "A100"])
    return status, out, args


def test_a_failed_benchmark_beside_a_good_one_exits_1_naming_system_and_benchmark(committee, capsys,
                                                                                 tmp_path):
    status, out, args = committee
    assert status == comparison.SYSTEM_FAILED
    gb200 = [a for a in args if a.startswith(("GB200=", "A100="))]
    assert fx.compare([*gb200, "--out", str(tmp_path / "o"), "--no-references"]) == comparison.SYSTEM_FAILED
    printed = capsys.readouterr().out
    assert "failed benchmark: GB200 image: no measured row (1 rows: failed: CUDA error: no kernel image " \
        "for sm_100)" in printed
    # its LLM row is fine: neither failed nor refused (rows written by hand are listed as unaudited)
    assert "failed benchmark: GB200 llm" not in printed and "not a measurement: GB200 llm" not in printed
    assert "unaudited: GB200 llm 800M bf16 seq 2048: no raw evidence" in printed


def test_a_row_that_is_no_measurement_is_marked_and_never_ranked_divided_or_extrapolated(committee):
    _, out, _ = committee
    table = pd.read_csv(out / "comparison.csv", keep_default_na=False, na_values=[""])
    mi300x = table[table["system"] == "MI300X"].iloc[0]
    assert not mi300x["measurement"]
    assert mi300x["not_a_measurement"] == (
        "4 timed iterations in 12 s; a measurement needs "
        f"{verdict.MIN_TIMED_ITERATIONS} and {verdict.MIN_TIMED_SECONDS:g} s")
    assert not mi300x["best"] and pd.isna(mi300x["per_s_per_device_ratio"])
    head = pd.read_csv(out / "headline.csv", keep_default_na=False, na_values=[""]).set_index("system")
    assert pd.isna(head.loc["MI300X", "per_s_per_device_ratio"])
    assert "MI300X" not in set(pd.read_csv(out / "time_to_solution.csv")["system"])
    page = (out / "report.html").read_text()
    line = page.split('id="headline-table-llm"')[1].split("<tr><td>MI300X")[1].split("</tr>")[0]
    assert "not a measurement (4 timed iterations" in line and "x</td>" not in line
    assert "MI300X llm: no measured row (1 rows: not a measurement (4 timed iterations" in page


def test_the_measurement_minimum_is_a_count_and_a_time(tmp_path):
    long_enough = fx.a100(seconds=60.0, timed_wh=24.0,
                          throughput={"iterations": 20, "time_per_iteration_s": 3.0})
    few = fx.a100(global_batch=256, throughput={"iterations": 19, "time_per_iteration_s": 10.0})
    short = fx.a100(global_batch=128, throughput={"iterations": 90, "time_per_iteration_s": 0.5})
    table = fx.load([str(fx.write_run(tmp_path, "a", [long_enough, few, short]))])
    assert (~table["measurement"]).tolist() == [False, True, True]
    assert rows.measured(table)["global_batch"].tolist() == [512]


def test_no_value_in_milli_hours_and_one_time_to_solution_line_per_system(committee):
    _, out, _ = committee
    page = (out / "report.html").read_text()
    assert not re.search(r"\d m(h|kWh|Wh)\b", page)
    solution = pd.read_csv(out / "time_to_solution.csv")
    assert not solution.duplicated(["system", "like"]).any()
    markdown = (out / "comparison_llm.md").read_text()
    assert "| 65.1 h |  | 93.7 kWh | 112 kWh |" in markdown  # A100: 20 x 908.8M tokens at 77 560 tokens/s
    assert "| 77,600 | 1.00x | 19,400 per GPU card | 1.00x | 19,400 per GPU | 1.00x | 77,600 |" in markdown


def test_a_reference_is_drawn_only_in_the_panel_of_its_exact_configuration():
    refs = reference.load()
    llm = reference.in_panel(refs, "llm", "800M", "bf16", 2048.0)
    assert set(llm["system"]) == {"GH200", "A100", "JEDI", "MI250"}
    assert reference.in_panel(refs, "llm", "800M", "bf16", 1024.0).empty
    assert reference.in_panel(refs, "llm", "800M", "fp16", 2048.0).empty
    # GC200's Table III is 224 px and names no precision: in no panel, 128 px least of all
    for size in (128.0, 224.0):
        assert reference.in_panel(refs, "image", "resnet50", "bf16", size).empty
    kinds = llm.set_index("system")["kind"].to_dict()
    assert kinds == {"GH200": "paper table/figure", "A100": "paper text, derived",
                     "JEDI": "upstream README example", "MI250": "upstream README example"}


def test_the_references_table_says_each_source_kind(committee):
    _, out, _ = committee
    section = (out / "report.html").read_text().split('id="references"')[1].split("</section>")[0]
    for kind in ("paper table/figure", "paper text, derived", "upstream README example"):
        assert kind in section
    assert "published" not in section.split("<tbody>")[1]


def test_best_rows_exclude_smoke_runs(tmp_path):
    table = figures.mark_best(fx.load([str(fx.write_run(tmp_path, "m", [fx.smoke()]))]))
    assert not table["best"].any()


def test_per_package_and_per_node_mean_the_same_on_every_system_and_per_device_keeps_its_unit(committee):
    _, out, _ = committee
    head = pd.read_csv(out / "headline.csv", keep_default_na=False, na_values=[""])
    head = head[head["benchmark"] == "llm"].set_index("system")
    # an MI250 card is 2 GCDs, a GB200 superchip 2 B200 GPUs: declared once, in platform.xml
    assert head.loc["MI250", "package_unit"] == "MI250 card (2 GCDs)"
    assert head.loc["MI250", "per_s_per_package"] == pytest.approx(2 * 11077.6)
    assert head.loc["MI250", "per_s_per_package_ratio"] == pytest.approx(2 * 11077.6 / 19390)
    assert head.loc["GB200", "per_s_per_package"] == pytest.approx(2 * 44000)
    assert head.loc["GH200", "per_s_per_package_ratio"] == pytest.approx(47505 / 19390)
    assert head.loc["MI250", "per_s_per_node_ratio"] == pytest.approx(8 * 11077.6 / (4 * 19390))
    # per device: kept, labelled with its unit, never divided across units
    assert pd.isna(head.loc["MI250", "per_s_per_device_ratio"])
    assert pd.isna(head.loc["GH200", "per_s_per_device_ratio"])
    assert head.loc["H100", "per_s_per_device_ratio"] == pytest.approx(33100 / 19390)
    markdown = (out / "comparison_llm.md").read_text()
    assert "per-device figures not divided: MI250 counts per GCD, A100 per GPU" in markdown
    mi250 = next(line for line in markdown.splitlines() if line.startswith("| MI250 |"))
    assert "| 11,100 per GCD |" in mi250 and "| 22,200 per MI250 card (2 GCDs) |" in mi250


def _column(markdown: str, system: str, title: str) -> str:
    lines = [line for line in markdown.split("\n\n")[1].splitlines() if line.startswith("|")]
    titles = [c.strip() for c in lines[0].strip("|").split("|")]
    row = next(line for line in lines if line.startswith(f"| {system} |"))
    return [c.strip() for c in row.strip("|").split("|")][titles.index(title)]


def test_gh200_gets_a_gpu_scope_energy_ratio_and_no_column_mixes_scopes(committee):
    _, out, _ = committee
    table = pd.read_csv(out / "comparison.csv", keep_default_na=False, na_values=[""])
    best = table[table["best"] & (table["benchmark"] == "llm")].set_index("system")
    gh200, a100 = best.loc["GH200"], best.loc["A100"]
    # the GPU-only channel over the whole run, on both sides
    assert gh200["work_per_wh_gpu"] == pytest.approx(47505 * 4 * 600 / (380 * 1.2))
    assert a100["work_per_wh_gpu"] == pytest.approx(19390 * 4 * 600 / (240 * 1.2))
    head = pd.read_csv(out / "headline.csv", keep_default_na=False, na_values=[""])
    head = head[head["benchmark"] == "llm"].set_index("system")
    assert head.loc["GH200", "work_per_wh_gpu_ratio"] == \
        pytest.approx(gh200["work_per_wh_gpu"] / a100["work_per_wh_gpu"])
    assert pd.isna(head.loc["GH200", "work_per_wh_ratio"])  # module against GPU: refused
    markdown = (out / "comparison_llm.md").read_text()
    assert _column(markdown, "GH200", "tokens/Wh, gpu scope, timed window") == "n/a"
    assert _column(markdown, "GH200", "tokens/Wh, module scope, timed window") == "253,000"
    assert _column(markdown, "A100", "tokens/Wh, module scope, timed window") == "n/a"
    # single runs: the ratio has no interval (the decision's sentences say why)
    assert _column(markdown, "GH200", "GPU-scope per Wh x ref") == "1.55x (no interval)"
    solution = markdown.split("## Time and energy to solution")[1]
    titles = [c.strip() for c in solution.strip().splitlines()[0].strip("|").split("|")]
    assert {"energy to solution, gpu scope, timed iterations", "energy to solution, module scope, "
            "timed iterations", "energy to solution, gpu scope, whole run"} <= set(titles)


def test_the_first_screen_ranks_per_node_and_per_package_and_leaves_the_smoke_run_out(committee):
    _, out, _ = committee
    page = (out / "report.html").read_text()
    assert re.findall(r'<section id="([^"]+)"', page)[:2] == ["decision-llm", "decision-image"]
    first = page.split('id="decision-llm"')[1].split("</section>")[0]
    one_run = "no interval: {} and {} have 1 run each"
    # rows written by hand are unaudited: each sentence says so of the systems it names
    assert ("Fastest per node: GH200 (unaudited), 190,000 tokens/s per node (1 run); over JUPITER "
            f"(unaudited) 1.06x ({one_run.format('GH200', 'JUPITER')}); 2.45x A100 "
            f"({one_run.format('GH200', 'A100')}).") in first
    # a GB200 superchip holds 2 B200 GPUs: per package it leads
    assert ("Fastest per accelerator package: GB200 (unaudited), 88,000 tokens/s per accelerator package "
            f"(1 run); over GH200 (unaudited) 1.85x ({one_run.format('GB200', 'GH200')}); 4.54x A100 "
            f"({one_run.format('GB200', 'A100')}).") in first
    # within the tie margin neither leads
    assert ("Most energy-efficient, like for like: GH200 (unaudited) ties with JUPITER (unaudited), "
            "250,000 tokens/Wh, accelerators alone (gpu scope), whole run (1 run); over JUPITER (unaudited) "
            "1.01x, a tie (within 2 %) (no interval") in first
    assert "MI300X: not ranked (not a measurement (4 timed iterations in 12 s" in first
    assert "MI300A: not ranked (failed: HIP out of memory)" in first
    assert 'alt="decision_llm_800M_bf16_seq_2048"' in first
    assert 'alt="solution_llm_800M_bf16_seq_2048"' in first
    image = page.split('id="decision-image"')[1].split("</section>")[0]
    assert "GB200: not ranked (failed: CUDA error" in image


def test_the_rankings_are_best_first_with_their_ratios(committee, tmp_path):
    _, _, args = committee
    table = figures.mark_best(fx.load(args))
    table = figures.add_ratios(table, "A100")
    head, _ = figures.headline(table, "A100")
    jobs = Jobs()
    solutions = figures.time_and_energy_to_solution(table, jobs)
    [llm, image] = decision.decide(table, head, solutions, jobs, "A100")
    per_node = llm.ranked["per_s_per_node"]
    assert per_node["system"].tolist() == ["GH200", "JUPITER", "GB200", "WAIH100", "JEDI", "H100", "MI250X",
                                           "MI250", "A100"]
    assert llm.ranked["per_s_per_package"]["system"].iloc[0] == "GB200"
    assert per_node["per_s_per_node"].is_monotonic_decreasing
    per_wh = llm.ranked["work_per_wh_gpu"].set_index("system")
    assert per_wh.loc["GH200", "work_per_wh_gpu_ratio"] == pytest.approx((47505 * 4 * 600 / 456) /
                                                                         (19390 * 4 * 600 / 288))
    assert image.ranked["per_s_per_node"]["system"].tolist() == ["H100", "A100"]
    # the Pareto front: no system on it is both slower and hungrier than another
    points = llm.solution.astype({"time_h": float, "gpu_energy_kwh": float})
    front = decision.pareto(points)
    assert points.loc[front, "system"].tolist() == ["GH200"]
    assert decision.pareto(pd.DataFrame({"time_h": [1.0, 2.0, 3.0], "gpu_energy_kwh": [3.0, 1.0, 2.0]})) \
        .tolist() == [True, True, False]
