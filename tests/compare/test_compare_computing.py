"""Computing apart from drawing: the comparison, its decisions, a
power-limit sweep's frontier, the results history's trend, what is left
out and the power timelines' folding are computed without matplotlib (in
a fresh interpreter, where nothing else imported it), and the charts draw
what was computed: the Pareto points and front of the decision, the
frontier's points on the axis, a configuration's runs in one timeline."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from caraml.compare import decision, figures, frontier, power
from caraml.compare.charts import decision as decision_charts
from caraml.compare.charts import power as power_charts
from caraml.compare.charts import style
from caraml.compare.jobs import Jobs
from tests.compare import rowfixtures as fx

COMPUTE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from caraml.compare import comparison, frontier, power, reference, rows, trend
    from caraml.compare.jobs import Jobs
    given = json.loads(sys.stdin.read())
    c = comparison.compute(given["committee"], all_runs=True, reference_system="A100",
                           refs=reference.load(), prices_file=Path(given["prices"]), jobs=Jobs(),
                           history=trend.load(Path(given["db"])), accept_unaudited=True)
    [sweep] = frontier.sweeps(rows.load(given["sweep"], accept_unaudited=True), Jobs())
    found = trend.find(Path(given["db"]), reference.load())
    print(json.dumps({
        "matplotlib": sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib"),
        "leaders": [d.decision.leaders[0] for d in c.decided], "drops": c.drops,
        "left_out": [item.kind for item in c.left_out], "front": list(sweep.on_axis()["limit"]),
        "timelines": len(power.fold(c.table)), "history_points": len(found.points)}))
""")


def test_the_comparison_decisions_frontier_and_trend_are_computed_without_matplotlib(tmp_path):
    db = tmp_path / "history.sqlite"
    given = {"committee": fx.repeated_committee(tmp_path / "c", db), "db": str(db),
             "prices": str(fx.committee_prices(tmp_path / "prices.yaml")),
             "sweep": [f"A100={fx.write_run(tmp_path, 'sweep', fx.a100_sweep())}"]}
    proc = subprocess.run([sys.executable, "-c", COMPUTE], input=json.dumps(given), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert done["matplotlib"] == []
    # what was computed there is the comparison's (tests/compare/test_compare_decision.py has its figures)
    assert [line.split(":")[0] for line in done["leaders"]] == ["Fastest per node"] * 2
    assert done["leaders"][0].startswith("Fastest per node: GH200 (unaudited), 190,000 tokens/s per node "
                                         "(median of 3")
    assert done["drops"][0].startswith("A100 15 % below its run of 2026-11-20")
    assert done["left_out"].count("excluded run") == 12 and "unpriced system" in done["left_out"]
    assert sorted(done["front"]) == ["200 W (asked 200)", "250 W (asked 250)", "280 W (asked 280)",
                                     "300 W (asked 300)", "360 W (asked 0.9)", "default (400 W)"]
    assert done["timelines"] == 17 and done["history_points"] == 1


def test_the_solution_chart_draws_the_points_and_the_front_the_decision_computed(tmp_path, monkeypatch):
    table = figures.add_ratios(figures.mark_best(fx.load(fx.committee(tmp_path))), "A100")
    head, _ = figures.headline(table, "A100")
    solutions = figures.time_and_energy_to_solution(table, Jobs())
    [llm, _] = decision.decide(table, head, solutions, Jobs(), "A100")
    points = llm.solution_points
    # the systems that measured the job's configuration, CPU's and the failed ones not among them
    assert set(points["system"]) == {"A100", "H100", "WAIH100", "GH200", "JEDI", "JUPITER", "GB200", "MI250",
                                     "MI250X"}
    assert points.loc[points["front"], "system"].tolist() == ["GH200"]
    drawn = {}

    def keep(fig, path):
        ax = fig.axes[0]
        drawn["points"] = [v for c in sorted(tuple(c.get_offsets()[0]) for c in ax.collections) for v in c]
        drawn["front"] = [*ax.lines[0].get_xdata(), *ax.lines[0].get_ydata()]
        return path
    monkeypatch.setattr(style, "save", keep)
    decision_charts.solution(llm, tmp_path)
    expected = sorted(zip(points["time_h"], points["gpu_energy_kwh"]))
    assert drawn["points"] == pytest.approx([v for point in expected for v in point])
    gh200 = points[points["system"] == "GH200"].iloc[0]
    assert drawn["front"] == pytest.approx([gh200["time_h"], gh200["gpu_energy_kwh"]])


def test_the_solution_lines_are_picked_by_their_case_key_not_their_words(tmp_path):
    args = [f"A100={fx.write_run(tmp_path, 'a', [fx.a100(), fx.a100(nodes=2, devices=8)])}"]
    table = figures.mark_best(fx.load(args))
    solutions = figures.time_and_energy_to_solution(table, Jobs())
    assert solutions[["case_key", "case"]].values.tolist() == [
        [figures.ONE_NODE, "one node (best configuration)"], [figures.FASTEST, "fastest measured (2 nodes)"]]
    # words changed: the decision still takes the one-node line
    reworded = solutions.assign(case=["a", "b"])
    head, _ = figures.headline(figures.add_ratios(table, "A100"), "A100")
    [chosen] = decision.decide(figures.add_ratios(table, "A100"), head, reworded, Jobs(), "A100")
    assert chosen.solution["case_key"].tolist() == [figures.ONE_NODE]


def test_the_frontier_axis_takes_its_scope_and_window_by_field(tmp_path):
    def cpu(asked: str, per_s: float, wh: float, **changes) -> dict:
        return fx.cpu_matmul(per_s_per_device=per_s, timed_wh=wh,
                             power_limit=fx.power_limit(asked, before=200.0), **changes)
    data = [cpu("default", 1842.1, 5.0), cpu("150", 1700.0, 4.0), cpu("120", 1500.0, 2.0, scope="module")]
    [sweep] = frontier.sweeps(fx.load([f"CPU={fx.write_run(tmp_path, 'c', data)}"]), Jobs(llm_tokens=1e9))
    assert (sweep.energy_scope, sweep.basis, sweep.scope) == ("host", "timed iterations",
                                                             "host scope, timed iterations")
    # the module-scope point is flagged and in the table, never on the host-scope axis
    assert list(sweep.on_axis()["power_limit"]) == ["150", "default"]
    assert len(sweep.points) == 3


def test_a_configuration_s_runs_fold_into_one_timeline_the_median_run_in_colour(tmp_path, monkeypatch):
    # three runs of one configuration (the median is the second), a fourth without samples, and
    # a second configuration: two timelines
    for run_id, rate in enumerate([19000.0, 19390.0, 19800.0, 19100.0]):
        data = [fx.a100(per_s_per_device=rate), fx.a100(global_batch=256)]
        fx.write_run(tmp_path, "a100", data, run_id=run_id, power={0: fx.samples()} if run_id < 3 else None)
    table = fx.load([f"A100={tmp_path / 'a100'}"], all_runs=True)
    folded = power.fold(table)
    assert [len(f.runs) for f in folded] == [4, 4]
    first = folded[0]
    assert first.title == "A100 llm 800M bf16 seq 2048, batch 512, 4 GPUs on 1 node"
    # the median of the four measured runs by throughput per device: 19,100 (the lower of the middle two)
    assert [run.name.split(" ")[0] for run in first.runs] == ["a100/000003", "a100/000000", "a100/000001",
                                                              "a100/000002"]
    drawn_lines = {}

    def keep(fig, path):
        drawn_lines["grey"] = sum(line.get_color() == power_charts.OTHER_RUNS for line in fig.axes[0].lines)
        drawn_lines["colour"] = len(fig.axes[0].lines) - drawn_lines["grey"]
        drawn_lines["title"] = fig.axes[0].get_title()
        return path
    monkeypatch.setattr(style, "save", keep)
    drawn = power_charts.timeline(first, tmp_path / "power.png")
    # the median run left no samples: the first run with samples is in colour, and the title says which
    assert drawn.coloured == "a100/000000 of 2026-11-24"
    assert drawn.without_samples == ("a100/000003 of 2026-11-24",)
    assert drawn.grey == ("a100/000001 of 2026-11-24", "a100/000002 of 2026-11-24")
    assert drawn_lines == {"grey": 8, "colour": 4,
                           "title": "A100 llm 800M bf16 seq 2048, batch 512, 4 GPUs on 1 node\n"
                                    "in colour: run a100/000000 of 2026-11-24"}
    assert power_charts.timeline(folded[1], tmp_path / "none.png") is None  # no run of it left samples


def test_the_report_says_which_runs_each_timeline_folds(tmp_path):
    for run_id, rate in enumerate([19000.0, 19390.0, 19800.0]):
        fx.write_run(tmp_path, "a100", [fx.a100(per_s_per_device=rate)], run_id=run_id,
                     power={0: fx.samples()})
    out = tmp_path / "out"
    assert fx.compare([f"A100={tmp_path / 'a100'}", "--all-runs", "--out", str(out), "--no-references"]) == 0
    assert [p.name for p in out.glob("power_*.png")] == ["power_000_A100.png"]
    section = (out / "report.html").read_text().split('id="power"')[1].split("</section>")[0]
    assert "(3 runs in 1 charts)" in section
    table = section.split('id="power-folded"')[1].split("</table>")[0]
    # in colour the median run, in grey the other two
    assert "<td>a100/000001 of 2026-11-24</td><td>a100/000000 of 2026-11-24; a100/000002 of 2026-11-24</td>" \
        in table
