"""Reference bands: verdicts at and beyond the bounds, the best-row rule for
published "up to" figures, the exit status, the shipped published figures
with their conversions, and one-line errors for bad reference files."""

from __future__ import annotations

import pytest
import yaml

from caraml.compare import CompareError, comparison, figures, reference, repeats, rows
from tests.compare import rowfixtures as fx


def _ref(**changes) -> dict:
    return {"system": "A100", "benchmark": "llm", "model": "800M", "figure": "throughput_per_device",
            "value": 20000.0, "lower": 0.1, "upper": 0.2, "kind": "measured by this suite",
            "source": "a test",
            **changes}


def _write(tmp_path, *entries, name="refs.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"references": list(entries)}))
    return path


def _rows(tmp_path, data):
    return figures.mark_best(fx.load([str(fx.write_run(tmp_path, "a", data))]))


@pytest.mark.parametrize("value, expected", [(18000.0, "within"), (17999.0, "below"), (24000.0, "within"),
                                             (24001.0, "above"), (float("nan"), "n/a")])
def test_verdict_at_the_bounds(value, expected):
    # band: 20000 x (1 - 0.1) to 20000 x (1 + 0.2)
    assert reference.verdict(value, 18000.0, 24000.0) == expected


def test_a_reference_without_batch_applies_to_the_best_row_only(tmp_path):
    table = _rows(tmp_path, [fx.a100(global_batch=16, per_s_per_device=9000.0),
                             fx.a100(global_batch=512, per_s_per_device=21000.0)])
    configs = repeats.collapse(table)
    checks = reference.verdicts(configs, reference.load(_write(tmp_path, _ref())))
    assert checks[["global_batch", "measured", "verdict"]].values.tolist() == [[512, 21000.0, "within"]]
    assert reference.row_verdicts(table, checks, configs).tolist() == ["n/a", "within"]


def test_a_reference_with_batch_applies_to_that_batch(tmp_path):
    table = _rows(tmp_path, [fx.a100(global_batch=16, per_s_per_device=9000.0),
                             fx.a100(global_batch=512, per_s_per_device=21000.0)])
    checks = reference.verdicts(table, reference.load(_write(tmp_path, _ref(global_batch=16))))
    assert checks[["global_batch", "verdict"]].values.tolist() == [[16, "below"]]


def test_the_command_exits_3_when_a_figure_falls_below_its_band_and_0_otherwise(tmp_path, capsys):
    path = fx.write_run(tmp_path, "a", [fx.a100(per_s_per_device=17000.0)])
    low = _write(tmp_path, _ref(), name="low.yaml")
    status = fx.compare([str(path), "--out", str(tmp_path / "o1"), "--references", str(low)])
    assert status == comparison.BELOW_BAND
    assert "BELOW BAND: A100 800M bf16 seq 2048 batch 512 throughput_per_device 1.7e+04 < 1.8e+04" \
        in capsys.readouterr().out
    fine = _write(tmp_path, _ref(value=17000.0), name="fine.yaml")
    assert fx.compare([str(path), "--out", str(tmp_path / "o2"), "--references", str(fine)]) == 0
    verdicts = (tmp_path / "o2" / "verdicts.csv").read_text()
    assert "within" in verdicts and "a test" in verdicts


def test_below_band_wins_over_a_failed_system(tmp_path):
    a = fx.write_run(tmp_path, "a", [fx.a100(per_s_per_device=17000.0)])
    b = fx.write_run(tmp_path, "b", [fx.failed()])
    low = _write(tmp_path, _ref())
    argv = [str(a), str(b), "--out", str(tmp_path / "o"), "--references", str(low)]
    assert fx.compare(argv) == comparison.BELOW_BAND


def test_a_csv_reference_file_works_like_yaml(tmp_path):
    path = tmp_path / "refs.csv"
    path.write_text("system,benchmark,model,figure,value,lower,upper,kind,source,global_batch\n"
                    "A100,llm,800M,throughput_per_device,30000,0.1,0.1,paper table/figure,paper,512\n")
    table = _rows(tmp_path, [fx.a100()])
    assert reference.verdicts(table, reference.load(path))["verdict"].tolist() == ["below"]


def test_the_shipped_references_hold_the_published_figures_with_their_conversions():
    refs = reference.load()
    # CPU is whichever host runs it: no figure of one host is another's reference
    assert "measured" not in set(refs["origin"]) and "CPU" not in set(refs["system"])
    pub = refs.set_index(["system", "figure"])
    # only a figure read off the paper's table or figure is called published
    assert pub.loc[("GH200", "throughput_per_device"), "origin"] == "published"
    assert pub.loc[("A100", "throughput_per_device"), "kind"] == "paper text, derived"
    assert {pub.loc[("JEDI", "throughput_per_node"), "kind"], *pub.loc["MI250", "kind"]} == \
        {"upstream README example"}
    assert set(pub.loc["GC200", "origin"]) == {"published"} and set(pub.loc["GC200", "size"]) == {224}
    assert pub.loc[("GH200", "throughput_per_device"), "value"] == 47505
    assert pub.loc[("A100", "throughput_per_device"), "value"] == pytest.approx(47505 / 2.45, abs=1)
    assert pub.loc[("JEDI", "throughput_per_node"), "value"] == 158152.8
    assert pub.loc[("JEDI", "throughput_per_node"), "global_batch"] == 2048
    assert pub.loc[("MI250", "throughput_per_device"), "value"] == pytest.approx(88620.76 / 8, abs=0.1)
    assert "8 GCDs" in pub.loc[("MI250", "throughput"), "source"]


def test_a_published_mi250_figure_is_checked_against_the_per_gcd_row(tmp_path):
    table = _rows(tmp_path, [fx.mi250(global_batch=32, per_s_per_device=9000.0)])
    checks = reference.verdicts(table, reference.load())
    assert sorted(checks["verdict"]) == ["below", "below"]  # 9000 per GCD < 0.85 x 11 077.6


@pytest.mark.parametrize("entry, message", [
    (_ref(system="H200"), "entry 1 (H200 800M throughput_per_device): unknown system 'H200'"),
    (_ref(lower=1.5), "malformed band: lower must be a fraction in [0 1) of the value, got 1.5"),
    (_ref(upper=-0.1), "malformed band: upper must be a fraction >= 0"),
    (_ref(value="fast"), "malformed band: value must be a positive number, got 'fast'"),
    ({k: v for k, v in _ref().items() if k != "source"}, "missing source"),
    (_ref(figure="energy_wh"), "figure 'energy_wh' is not one of"),
    (_ref(batch=4), "unknown key batch"),
])
def test_a_bad_reference_entry_is_a_one_line_error_naming_file_and_entry(tmp_path, entry, message):
    path = _write(tmp_path, entry)
    with pytest.raises(CompareError) as err:
        reference.load(path)
    text = str(err.value)
    assert text.startswith(f"{path}: entry 1") and message in text and "\n" not in text


def test_a_file_that_is_not_a_reference_file_is_a_one_line_error(tmp_path):
    path = tmp_path / "refs.yaml"
    path.write_text("references: [unclosed\n")
    with pytest.raises(CompareError, match=r"refs.yaml: not a YAML or CSV reference file") as err:
        reference.load(path)
    assert "\n" not in str(err.value)
    path.write_text("figures: []\n")
    with pytest.raises(CompareError, match=r"refs.yaml: no list under the key 'references'"):
        reference.load(path)


def test_a_healthy_batch_sweep_never_raises_the_alarm_of_a_reference_for_one_size(tmp_path, capsys):
    # the shipped A100 reference names size 2048 and no batch: an "up to" figure for the best batch only
    sweep = [fx.a100(global_batch=batch, per_s_per_device=rate)
             for batch, rate in ((16, 6000.0), (64, 11000.0), (256, 17000.0), (1024, 19500.0))]
    out = tmp_path / "o"
    assert fx.compare([f"A100={fx.write_run(tmp_path, 'a', sweep)}", "--out", str(out)]) == 0
    assert "BELOW BAND" not in capsys.readouterr().out
    collapsed = repeats.collapse(rows.measured(_rows(tmp_path / "b", sweep)))
    checks = reference.verdicts(collapsed, reference.load())
    assert checks[["global_batch", "verdict"]].values.tolist() == [[1024, "within"]]


def test_a_reference_is_checked_against_the_median_of_the_repeats_of_its_configuration(tmp_path):
    # three runs of batch 16: one slow repeat (17,000 < 18,000) does not put the configuration below its band
    runs = [fx.write_run(tmp_path, "a", [fx.a100(global_batch=16, per_s_per_device=rate)], run_id=i)
            for i, rate in enumerate((19000.0, 17000.0, 19500.0))][0]
    table = figures.mark_best(fx.load([str(runs)], all_runs=True))
    configs = repeats.collapse(rows.measured(table))
    checks = reference.verdicts(configs, reference.load(_write(tmp_path, _ref(global_batch=16))))
    assert checks[["measured", "verdict"]].values.tolist() == [[19000.0, "within"]]
    assert reference.row_verdicts(table, checks, configs).tolist() == ["within"] * 3
