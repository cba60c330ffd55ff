"""caraml-compare with the centre's node energy: systems ranked by work per
node-Wh only where every ranked system has a node figure over the same
window, otherwise one line naming those without one while the accelerators'
ranking stays, labelled as such; the accelerators' share of the node's
energy where jpwr measured both; every node figure with its scope, window
and source."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from caraml.compare import decision, figures
from caraml.compare.charts import decision as decision_charts
from caraml.compare.jobs import Jobs
from caraml.row import row_json
from tests.compare import rowfixtures as fx

PM_COUNTERS = "slurm-acct_gather_energy/pm_counters"
NO_METER = "the cluster meters no node: its AcctGatherEnergyType is acct_gather_energy/none"


def with_node(data: dict, node_wh: float, share: float | None = None, window: str = "job") -> dict:
    """The row with a node figure of Slurm's pm_counters plugin (and jpwr's
    accelerator share where given), as the row model decides it."""
    row = row_json.from_dict(data)
    work = row.work_per_wh_run * row.wh_run
    return row_json.to_dict(dataclasses.replace(
        row, node_energy_state="measured", node_energy_source=PM_COUNTERS, node_energy_scope="node",
        node_energy_window=window, node_wh=node_wh, node_window_s=900.0,
        node_power_w_per_node=node_wh * 3600 / 900.0, work_per_node_wh=work / node_wh,
        accelerator_share_of_node_pct=share, accelerator_share_basis="gpu/node(run)" if share else None))


def without_node(data: dict, state: str = "none", reason: str = NO_METER) -> dict:
    return row_json.to_dict(dataclasses.replace(row_json.from_dict(data), node_energy_state=state,
                                                node_energy_reason=reason))


def compared(tmp_path, **systems: list[dict]) -> tuple[list[str], pd.DataFrame, decision.Decision]:
    args = [f"{name}={fx.write_run(tmp_path, name, found)}" for name, found in systems.items()]
    table = figures.add_ratios(figures.mark_best(fx.load(args)), "A100")
    head, _ = figures.headline(table, "A100")
    jobs = Jobs()
    [llm] = decision.decide(table, head, figures.time_and_energy_to_solution(table, jobs), jobs, "A100")
    return args, table, llm


def test_every_system_with_node_energy_is_ranked_per_node_wh_with_its_ratio(tmp_path):
    a100, gh200 = fx.a100(), fx.gh200()
    _, table, llm = compared(tmp_path, A100=[with_node(a100, 600.0, share=48.0)],
                             GH200=[with_node(gh200, 900.0, share=62.0)])
    ranked = llm.ranked["work_per_node_wh"].set_index("system")
    work = {name: row_json.from_dict(d).work_per_wh_run * row_json.from_dict(d).wh_run
            for name, d in (("A100", a100), ("GH200", gh200))}
    assert list(ranked.index) == ["GH200", "A100"]  # 114 M tokens over 900 Wh before 46.5 M over 600
    assert ranked.loc["GH200", "work_per_node_wh_ratio"] == pytest.approx(
        (work["GH200"] / 900.0) / (work["A100"] / 600.0))
    assert not [line for line in llm.unranked if "node energy" in line]
    [leader] = [line for line in llm.leaders if "whole nodes" in line]
    assert leader.startswith(
        "Most energy-efficient per whole node: GH200 (unaudited), ")
    assert "accelerators' share of its node energy 62.0 %, jpwr's gpu/node(run)" in leader
    # the accelerators' ranking stays beside it
    assert list(llm.ranked["work_per_wh_gpu"]["system"]) == ["GH200", "A100"]


def test_one_system_without_node_energy_refuses_the_node_ranking_naming_it(tmp_path, capsys):
    a100, gh200 = with_node(fx.a100(), 600.0), without_node(fx.gh200())
    args, table, llm = compared(tmp_path, A100=[a100], GH200=[gh200])
    assert llm.ranked["work_per_node_wh"].empty
    assert (f"node energy not compared: no node figure for GH200 (none: {NO_METER}); the energy ranking "
            "counts the accelerators alone (gpu scope, whole run)") in llm.unranked
    assert list(llm.ranked["work_per_wh_gpu"]["system"]) == ["GH200", "A100"]
    assert not [line for line in llm.leaders if "whole nodes" in line]
    # the ratio is refused too, with the same reason, and the report says both
    gh = table.set_index("system").loc["GH200"]
    assert pd.isna(gh["work_per_node_wh_ratio"]) and "node energy not compared: no node figure for GH200" \
        in gh["ratio_note"]
    out = tmp_path / "out"
    assert fx.compare([*args, "--out", str(out), "--no-references"]) == 0
    page = (out / "report.html").read_text()
    assert "node energy not compared: no node figure for GH200" in page.split('id="decision-llm"')[1]


def test_a_row_from_before_node_energy_says_its_row_records_none(tmp_path):
    _, _, llm = compared(tmp_path, A100=[with_node(fx.a100(), 600.0)], GH200=[fx.gh200()])
    assert any("no node figure for GH200 (its row records no node energy)" in line for line in llm.unranked)


def test_node_figures_over_different_windows_are_not_ranked_together(tmp_path):
    _, _, llm = compared(tmp_path, A100=[with_node(fx.a100(), 600.0)],
                         GH200=[with_node(fx.gh200(), 900.0, window="run")])
    assert llm.ranked["work_per_node_wh"].empty
    assert any(line.startswith("node energy not compared: over different windows (A100 job, GH200 run)")
               for line in llm.unranked)


def test_the_tables_show_the_node_figure_with_scope_window_source_and_the_share(tmp_path):
    args = [f"{name}={fx.write_run(tmp_path, name, found)}" for name, found in
            (("A100", [with_node(fx.a100(), 600.0, share=48.0)]), ("GH200", [without_node(fx.gh200())]))]
    out = tmp_path / "out"
    assert fx.compare([*args, "--out", str(out), "--no-references"]) == 0
    markdown = (out / "comparison_llm.md").read_text()
    assert "tokens/Wh, node scope, job window" in markdown
    assert "48.0 % (gpu/node(run), jpwr)" in markdown
    assert f"600 Wh, node scope, job window, 2,400 W per node ({PM_COUNTERS})" in markdown
    assert f"none: {NO_METER}" in markdown
    # each system's card names its node meter
    cards = (out / "report.html").read_text().split("node energy from")
    assert len(cards) == 3 and PM_COUNTERS in cards[1] and "not recorded" in cards[2]


@pytest.mark.parametrize("gh200_node, scope", [(900.0, "node"), (None, "gpu")])
def test_cost_to_solution_counts_node_energy_only_where_every_costed_system_has_it(tmp_path, gh200_node,
                                                                                   scope):
    a100 = with_node(fx.a100(), 600.0)
    gh200 = with_node(fx.gh200(), gh200_node) if gh200_node else without_node(fx.gh200())
    args = [f"{name}={fx.write_run(tmp_path, name, [found])}"
            for name, found in (("A100", a100), ("GH200", gh200))]
    path = tmp_path / "prices.yaml"
    path.write_text("currency: EUR\nprices:\n"
                    "  - {system: A100, node_hour: 4.0, electricity_kwh: 0.3, pue: 1.2}\n"
                    "  - {system: GH200, node_hour: 6.0, electricity_kwh: 0.3, pue: 1.1}\n")
    out = tmp_path / "out"
    assert fx.compare([*args, "--out", str(out), "--reference-system", "A100", "--prices", str(path)]) == 0
    cost = pd.read_csv(out / "cost_llm_800M_bf16_seq_2048.csv").set_index("system")
    assert set(cost["energy_scope"]) == {scope}
    tokens = 20 * 908_759_040  # the job: 20 tokens per parameter of the 800M GPT
    row = row_json.from_dict(a100)
    per_wh = row.work_per_node_wh if scope == "node" else row.work_per_wh_gpu
    assert cost.loc["A100", "electricity_cost"] == pytest.approx(tokens / per_wh / 1000 * 1.2 * 0.3)
    solution = pd.read_csv(out / "time_to_solution.csv").set_index("system")
    assert solution.loc["A100", "node_energy_kwh"] == pytest.approx(tokens / row.work_per_node_wh / 1000)


def test_the_decision_charts_each_systems_accelerator_share_of_its_node(tmp_path):
    args = [f"{name}={fx.write_run(tmp_path, name, found)}" for name, found in
            (("A100", [with_node(fx.a100(), 600.0, share=48.0)]), ("GH200", [without_node(fx.gh200())]))]
    out = tmp_path / "out"
    assert fx.compare([*args, "--out", str(out), "--no-references"]) == 0
    assert (out / "node_share_llm_800M_bf16_seq_2048.png").is_file()
    assert 'alt="node_share_llm_800M_bf16_seq_2048"' in (out / "report.html").read_text()
    # no system with the share: no chart
    _, _, llm = compared(tmp_path / "none", A100=[fx.a100()], GH200=[fx.gh200()])
    assert llm.shares.empty and decision_charts.share(llm, tmp_path) is None
