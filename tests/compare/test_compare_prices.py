"""Cost to solution from an optional prices file: node-hours at the
system's price (or its capital cost over its lifetime) plus the GPU-scope
energy times PUE times the electricity price, ranked cheapest first; a
page without the file says how to add one; a bad file is one line."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from caraml.compare import CompareError, prices
from tests.compare import rowfixtures as fx


def _write(tmp_path, document) -> str:
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def test_cost_is_node_hours_plus_gpu_energy_times_pue_cheapest_first(tmp_path):
    args = [f"A100={fx.write_run(tmp_path, 'a', [fx.a100()])}",
            f"GH200={fx.write_run(tmp_path, 'g', [fx.gh200()])}"]
    path = _write(tmp_path, {"currency": "EUR", "prices": [
        {"system": "A100", "node_hour": 4.0, "electricity_kwh": 0.3, "pue": 1.2},
        {"system": "GH200", "capital_per_node": 250000, "lifetime_years": 5, "electricity_kwh": 0.3,
         "pue": 1.1}]})
    out = tmp_path / "out"
    assert fx.compare([*args, "--out", str(out), "--reference-system", "A100", "--prices", path]) == 0
    cost = pd.read_csv(out / "cost_llm_800M_bf16_seq_2048.csv").set_index("system")
    tokens = 20 * 908_759_040
    a100_h, a100_kwh = tokens / 77560 / 3600, tokens / (77560 * 600 / 288) / 1000
    assert cost.loc["A100", "cost"] == pytest.approx(a100_h * 4.0 + a100_kwh * 1.2 * 0.3)
    gh200_h = tokens / (47505 * 4) / 3600
    assert cost.loc["GH200", "node_hours_cost"] == pytest.approx(gh200_h * 250000 / (5 * 365.25 * 24))
    assert list(cost.index) == ["GH200", "A100"]  # cheapest first
    page = (out / "report.html").read_text()
    assert 'alt="cost_llm_800M_bf16_seq_2048"' in page and "--prices FILE" not in page


def test_without_a_prices_file_the_decision_says_how_to_add_one(tmp_path):
    out = tmp_path / "out"
    run = fx.write_run(tmp_path, "a", [fx.a100()])
    assert fx.compare([str(run), "--out", str(out), "--no-references"]) == 0
    assert "Cost to solution: give <code>--prices FILE</code>" in (out / "report.html").read_text()
    assert not list(out.glob("cost_*"))


@pytest.mark.parametrize("document, message", [
    ({"prices": []}, "no currency"),
    ({"currency": "EUR", "prices": [{"system": "A100", "electricity_kwh": 0.3, "pue": 1.2}]},
     "give node_hour, or capital_per_node with lifetime_years"),
    ({"currency": "EUR", "prices": [{"system": "A100", "node_hour": -1, "electricity_kwh": 0.3, "pue": 1.2}]},
     "node_hour must be a positive number, got -1"),
    ({"currency": "EUR", "prices": [{"system": "A100", "node_hour": 1, "electricity_kwh": 0.3, "pue": 1.2,
                                     "tax": 0.2}]}, "unknown key tax"),
    ({"currency": "EUR"}, "no list under the key 'prices'"),
    ({"currency": "EUR", "prices": [{"system": "A100", "node_hour": 1, "electricity_kwh": 0.3, "pue": 0.5}]},
     "pue must be at least 1 (the facility's power over the IT equipment's), got 0.5"),
])
def test_a_bad_prices_file_is_one_line_naming_file_and_entry(tmp_path, document, message):
    path = _write(tmp_path, document)
    with pytest.raises(CompareError) as err:
        prices.load(path)
    assert str(err.value).startswith(path) and message in str(err.value) and "\n" not in str(err.value)


def test_a_binary_prices_file_is_refused_in_one_line_by_the_command(tmp_path, capsys):
    path = tmp_path / "prices.xlsx"
    path.write_bytes(b"PK\x03\x04\x14\x00\x06\x00\x08\x00\xff\xfe\x00\x00")  # a spreadsheet's start
    run = fx.write_run(tmp_path, "a", [fx.a100()])
    out = tmp_path / "out"
    assert fx.compare([str(run), "--out", str(out), "--no-references", "--prices", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"caraml-compare: error: {path}: not a text file (byte 0xff at offset 10 "
                                "is no UTF-8): the prices file is YAML text; see docs/compare.md for "
                                "the format"], err
