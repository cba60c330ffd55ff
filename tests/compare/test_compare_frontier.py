"""The power-limit sweep in caraml-compare, from fixture rows whose figures
are computed by hand (rowfixtures.a100_sweep): each system ranks by its run
at the default limit only; the sweep's frontier marks the Pareto-optimal
limits and names the limit with the most work per Wh beside the default's;
smoke points are left out of the frontier and the chart, failed points and
points whose limit was not restored are listed with their reason and never
on the front; a system without a sweep has no frontier section."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from caraml.compare import comparison, frontier, report, rows
from caraml.compare.charts import frontier as frontier_chart
from caraml.compare.charts import style
from caraml.compare.jobs import Jobs
from tests.compare import rowfixtures as fx

JOB_TOKENS = 20 * 908_759_040  # the 800M job: 20 tokens per parameter
# tokens/s of the whole job and tokens/Wh of the timed window (600 s) per limit, as a100_sweep writes them
RATE = {"default": 77560.0, "0.9": 78000.0, "300": 74000.0, "250": 68000.0, "200": 52000.0, "280": 71200.0}
PER_WH = {"default": 77560 * 600 / 240, "0.9": 78000 * 600 / 225, "300": 74000 * 600 / 190,
          "250": 68000 * 600 / 165, "200": 52000 * 600 / 145, "280": 71200 * 600 / 170}
TITLE = "A100 llm 800M bf16 seq 2048, batch 512, 4 GPUs on 1 node"


def _sweep_of(tmp_path, data: list[dict], jobs: Jobs = Jobs()) -> frontier.Sweep:
    [sweep] = frontier.sweeps(fx.load([f"A100={fx.write_run(tmp_path, 'a100', data)}"]), jobs)
    return sweep


@pytest.fixture
def a100_sweep(tmp_path):
    return _sweep_of(tmp_path, fx.a100_sweep())


def test_the_row_carries_its_limit_and_a_row_without_one_is_at_the_default(tmp_path):
    table = fx.load([f"A100={fx.write_run(tmp_path, 'a100', [fx.a100(), *fx.a100_sweep()])}"])
    plain, default, fraction, unrestored = (table.iloc[i] for i in (0, 1, 2, 7))
    def values(row: pd.Series, *names: str) -> tuple:
        return tuple(row[name] for name in names)
    assert values(plain, "limit_swept", "limit_default", "power_limit_restored") == (False, True, None)
    assert values(default, "limit_swept", "limit_default", "power_limit_w") == (True, True, 400.0)
    assert values(fraction, "power_limit", "power_limit_asked_w", "power_limit_w") == ("0.9", 360.0, 360.0)
    assert values(fraction, "limit_default", "power_limit_before_w", "power_limit_restored") == \
        (False, 400.0, True)
    assert unrestored["power_limit_restored"] is False
    # rows that name no scope
    assert (plain["power_limit_scope"], fraction["power_limit_scope"]) == ("n/a", "n/a")
    ranked, capped = rows.at_default_limit(table)
    assert list(ranked.index) == [0, 1] and len(capped) == 7


def test_each_limit_is_a_point_marked_pareto_optimal_dominated_or_off_the_frontier(a100_sweep):
    points = a100_sweep.points.set_index("power_limit")
    assert list(points.index) == ["150", "200", "250", "280", "300", "0.9", "100", "default"]  # lowest first
    assert points["kind"].to_dict() == {
        # 360 W is faster and more frugal than the default; 250 W than 200 W
        "0.9": "Pareto-optimal", "300": "Pareto-optimal", "250": "Pareto-optimal",
        "default": "dominated", "200": "dominated",
        "150": "not a measurement", "280": "flagged", "100": "failed"}
    assert points.loc["250", "limit"] == "250 W (asked 250)"
    assert points.loc["0.9", "limit"] == "360 W (asked 0.9)"
    assert points.loc["default", "limit"] == "default (400 W)"
    for asked, rate in RATE.items():
        assert points.loc[asked, "time_h"] == pytest.approx(JOB_TOKENS / rate / 3600), asked
        assert points.loc[asked, "energy_kwh"] == pytest.approx(JOB_TOKENS / PER_WH[asked] / 1000), asked
    assert points.loc["250", "wh_ratio"] == pytest.approx(PER_WH["250"] / PER_WH["default"])
    assert points.loc["250", "time_ratio"] == pytest.approx(RATE["default"] / RATE["250"])
    assert a100_sweep.scope == "gpu scope, timed iterations" and not a100_sweep.estimated


def test_the_headline_names_the_limit_with_the_most_work_per_wh_beside_the_default(a100_sweep):
    # 280 W gives more tokens per Wh still, but its limit was not restored: it is never named
    assert a100_sweep.headline == (
        f"{TITLE}: most tokens per Wh at 250 W (asked 250): 247,000 tokens/Wh, 1.28x the default limit's "
        "(400 W) 194,000 tokens/Wh, taking 1.14x as long (gpu scope, timed iterations).")


def test_a_point_that_is_no_measurement_is_left_out_and_a_failed_or_unrestored_point_says_why(a100_sweep):
    points = a100_sweep.points.set_index("power_limit")
    short = points.loc["150"]
    assert short["standing"].startswith("not a measurement (4 timed iterations in 12 s")
    # never extrapolated, never divided
    assert short[["time_h", "energy_kwh", "wh_ratio", "time_ratio"]].isna().all()
    assert points.loc["100", "standing"] == ("failed: power limit 100 W is below the device's minimum of "
                                             "150 W; give 150 to 400")
    assert points.loc["280", "standing"] == ("flagged: power limit not restored after the job (it was 400 W "
                                             "before): the node may have been left capped")
    assert points.loc["280", ["wh_ratio", "time_ratio"]].isna().all()


def test_the_chart_draws_the_measurements_and_joins_the_front(a100_sweep, tmp_path, monkeypatch):
    drawn = {}

    def keep(fig, path):
        ax = fig.axes[0]
        drawn["points"] = [v for c in sorted(tuple(c.get_offsets()[0]) for c in ax.collections) for v in c]
        drawn["front"] = list(ax.lines[0].get_xdata())
        drawn["labels"] = sorted(t.get_text().strip() for t in ax.texts)
        drawn["y"] = ax.get_ylabel()
        return path
    monkeypatch.setattr(style, "save", keep)
    frontier_chart.chart(a100_sweep, tmp_path)
    hours = {a: JOB_TOKENS / r / 3600 for a, r in RATE.items()}
    # the smoke point is not drawn (never extrapolated), nor the failed one (no figures)
    expected = sorted((hours[a], JOB_TOKENS / PER_WH[a] / 1000) for a in RATE)
    assert drawn["points"] == pytest.approx([v for point in expected for v in point])
    assert drawn["front"] == pytest.approx([hours["0.9"], hours["300"], hours["250"]])
    assert drawn["labels"] == ["200 W (asked 200)", "250 W (asked 250)", "280 W (asked 280), flagged",
                               "300 W (asked 300)", "360 W (asked 0.9)", "default (400 W)"]
    assert drawn["y"] == "energy to solution [kWh]\ngpu scope, timed iterations"


def test_the_default_limit_named_where_no_other_gives_more(tmp_path):
    sweep = _sweep_of(tmp_path, [fx.a100(power_limit=fx.power_limit("default")),
                                 fx.a100(per_s_per_device=15000.0, timed_wh=235.0,
                                         power_limit=fx.power_limit("300"))])
    assert sweep.headline == (f"{TITLE}: the default limit (400 W) gives the most tokens per Wh: 194,000 "
                              "tokens/Wh (gpu scope, timed iterations); no other limit gives more.")


def test_estimated_energy_is_labelled_and_another_scope_is_never_on_the_frontier(tmp_path):
    def cpu(asked: str, per_s: float, wh: float, **changes) -> dict:
        return fx.cpu_matmul(per_s_per_device=per_s, timed_wh=wh,
                             power_limit=fx.power_limit(asked, before=200.0), **changes)
    data = [cpu("default", 1842.1, 5.0), cpu("150", 1700.0, 4.0), cpu("120", 1500.0, 2.0, scope="module")]
    sweep = _sweep_of(tmp_path, data, Jobs(llm_tokens=1e9))
    points = sweep.points.set_index("power_limit")
    assert points["kind"].to_dict() == {"120": "flagged", "150": "Pareto-optimal",
                                        "default": "Pareto-optimal"}
    assert points.loc["120", "off"] == ("energy at scope module, timed iterations, the sweep's at scope "
                                        "host, timed iterations: not like for like")
    assert sweep.headline.endswith("(host scope, timed iterations, energy estimated).")
    assert "most tokens per Wh at 150 W (asked 150)" in sweep.headline
    shown = pd.DataFrame(report.sweep_display(sweep.points)).set_index("power limit per device")
    assert shown.loc["150 W (asked 150)", "tokens/Wh, host scope, timed iterations"] == "255,000 (estimated)"
    assert shown.loc["150 W (asked 150)", "per Wh x default"].endswith("x (estimated)")
    # without a job of its model the sweep still names its best limit, and says why no chart
    plain = _sweep_of(tmp_path / "plain", data)
    assert "most tokens per Wh at 150 W (asked 150)" in plain.headline
    assert plain.points["time_h"].isna().all() and frontier_chart.chart(plain, tmp_path) is None
    assert plain.job.startswith("cpu-small fp32 seq 256 does not stand for the job")
    assert plain.job.endswith("--llm-tokens N makes any model the job")


def test_the_report_ranks_default_rows_and_gives_the_sweep_its_section(tmp_path, capsys):
    out = tmp_path / "out"
    assert fx.compare([*fx.sweep_demo(tmp_path), "--out", str(out), "--no-references"]) == 0
    head = pd.read_csv(out / "headline.csv").set_index("system")
    # the capped points are never ranked: A100 is its default row (the 360 W point ran faster still)
    assert list(head.index) == ["GH200", "A100"] and head.loc["A100", "per_s_per_device"] == 19390.0
    assert set(pd.read_csv(out / "time_to_solution.csv")["system"]) == {"GH200", "A100"}
    assert len(pd.read_csv(out / "comparison.csv")) == 9  # every row is kept
    assert len(pd.read_csv(out / "frontier.csv")) == 8
    page = (out / "report.html").read_text()
    # a section for A100's sweep only, right after the decision; none for GH200, which swept nothing
    sections = re.findall(r'<section id="([^"]+)"', page)
    section = "frontier-" + report.slug(TITLE)
    assert [s for s in sections if s.startswith("frontier-")] == [section]
    assert sections.index("decision-llm") < sections.index(section) < sections.index("headline-llm")
    body = page.split(f'id="{section}"')[1].split("</section>")[0]
    assert f'alt="frontier_{report.slug(TITLE)}"' in body
    assert "most tokens per Wh at 250 W (asked 250)" in body
    assert body.count("<tr><td>") == 8
    headline = page.split('id="headline-llm"')[1].split("</section>")[0]
    assert "Power-limit sweep: " + TITLE + ": most tokens per Wh at 250 W" in headline
    printed = capsys.readouterr().out
    assert f"power-limit sweep point flagged: {TITLE} at 280 W (asked 280): power limit not restored" \
        in printed
    assert "not a measurement: A100 llm 800M bf16 seq 2048 at power limit 100: failed: power limit 100 W" \
        in printed


def test_only_capped_rows_are_one_line_and_exit_2(tmp_path, capsys):
    capped = fx.write_run(tmp_path, "a100", fx.a100_sweep()[1:])
    assert fx.compare([f"A100={capped}", "--out", str(tmp_path / "out")]) == comparison.BAD_INPUT
    assert "only power-capped rows ran" in capsys.readouterr().err


def test_a_sweep_whose_every_point_failed_has_no_frontier_and_says_why(tmp_path):
    refused = "no privilege to set the power limit: run as root or with the centre's power-management rights"
    sweep = _sweep_of(tmp_path, [fx.failed("A100", reason=refused, power_limit=fx.power_limit(asked))
                                 for asked in ("default", "300")])
    assert sweep.headline == (f"{TITLE}: no limit of the sweep is a measurement, so no frontier (each "
                              "point's reason below).")
    assert list(sweep.points["standing"]) == [f"failed: {refused}"] * 2
    assert sweep.on_axis().empty and frontier_chart.chart(sweep, tmp_path) is None


def test_a_limit_the_job_never_set_or_that_differs_across_devices_is_flagged(tmp_path):
    sweep = _sweep_of(tmp_path, [
        fx.a100(power_limit=fx.power_limit("default"), flags=["power-limit-not-set"]),
        fx.a100(per_s_per_device=18500.0, timed_wh=190.0, power_limit=fx.power_limit("300"),
                flags=["power-limit-not-set"]),
        fx.a100(per_s_per_device=17000.0, timed_wh=165.0, power_limit=fx.power_limit("250"),
                flags=["power-limit-differs-on-ranks(2-3)"])])
    points = sweep.points.set_index("power_limit")
    # the default point sets nothing: not setting it is no doubt
    assert points["kind"].to_dict() == {"250": "flagged", "300": "flagged", "default": "Pareto-optimal"}
    assert points.loc["300", "off"] == "the job never set the power limit (its driver takes none)"
    assert points.loc["250", "off"] == "the devices reported other limits than rank 0's on ranks 2-3"
    assert sweep.headline.startswith(f"{TITLE}: the default limit (400 W) gives the most tokens per Wh")


def test_a_point_whose_watts_could_not_be_worked_out_is_no_default_point(tmp_path):
    no_tdp = fx.failed("A100", reason="power limit 0.75 is a fraction of the TDP, and this system declares "
                       "no TDP", power_limit={**fx.power_limit("0.75"), "asked_w": None, "reported_w": None})
    table = fx.load([f"A100={fx.write_run(tmp_path, 'a100', [fx.a100(), no_tdp])}"])
    ranked, capped = rows.at_default_limit(table)
    assert list(ranked["state"]) == ["ok"] and list(capped["power_limit"]) == ["0.75"]


def test_a_gh200_module_limit_is_labelled_as_the_modules(tmp_path):
    module = {**fx.power_limit("0.8", tdp=680.0, before=680.0), "scope": "module"}
    gpu = {**fx.power_limit("300"), "scope": "gpu"}
    run = fx.write_run(tmp_path, "a100", [fx.a100(power_limit=module), fx.a100(power_limit=gpu)])
    table = fx.load([f"A100={run}"])
    assert list(table["power_limit_scope"]) == ["module", "gpu"]
    assert [frontier.limit_label(row) for _, row in table.iterrows()] == \
        ["544 W module (asked 0.8)", "300 W (asked 300)"]
