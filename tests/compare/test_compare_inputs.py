"""Bad input gives one line on stderr naming the file and the problem, and
exit status 2; failed rows are listed, never dropped; estimated energy is
labelled in every derived figure."""

from __future__ import annotations

import pandas as pd
import pytest

from caraml.compare import cli
from tests.compare.compare_tables import IMAGE_ROW, LLM_ROW, run_dir


def _error(capsys, argv) -> str:
    assert cli.main(argv) == cli.BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("caraml-compare: error: ")
    return err


def test_a_directory_that_is_not_a_jube_run(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    err = _error(capsys, [str(tmp_path / "notes"), "--out", str(tmp_path / "out")])
    assert f"{tmp_path / 'notes'}: not a JUBE run directory" in err
    err = _error(capsys, [str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    assert f"{tmp_path / 'missing'}: no such directory" in err


def test_a_run_whose_rows_all_failed_lists_why(tmp_path, capsys):
    path = run_dir(tmp_path, "a", IMAGE_ROW, [{"Status": "FAILED", "Error": "CUDA out of memory",
                                              "Images/s": None}])
    err = _error(capsys, [str(path), "--out", str(tmp_path / "out")])
    assert "result_csv.dat: no row has status ok (1 rows: FAILED: CUDA out of memory)" in err


def test_systems_without_a_common_benchmark(tmp_path, capsys):
    a = run_dir(tmp_path, "a", IMAGE_ROW, [{}])
    b = run_dir(tmp_path, "b", LLM_ROW, [{}])
    err = _error(capsys, [f"X={a}", f"Y={b}", "--out", str(tmp_path / "out")])
    assert "no common benchmark (X ran image; Y ran llm)" in err


def test_a_table_of_another_benchmark(tmp_path, capsys):
    path = run_dir(tmp_path, "a", {"System": "A100", "Samples/s": 3.0, "Status": "ok"}, [{}])
    err = _error(capsys, [str(path), "--out", str(tmp_path / "out")])
    assert "result_csv.dat: neither Tokens/s nor Images/s among its columns" in err


def test_an_unknown_reference_system(tmp_path, capsys):
    path = run_dir(tmp_path, "a", IMAGE_ROW, [{}])
    err = _error(capsys, [str(path), "--out", str(tmp_path / "out"), "--reference-system", "B"])
    assert "--reference-system B: no run of that system given (A100)" in err


def test_failed_rows_are_kept_and_listed(tmp_path, capsys):
    path = run_dir(tmp_path, "a", IMAGE_ROW, [{}, {"GlobalBatchSize": 4096, "Status": "FAILED",
                                                  "Error": "CUDA out of memory", "Images/s": None}])
    out = tmp_path / "out"
    assert cli.main([str(path), "--out", str(out), "--no-references"]) == 0
    printed = capsys.readouterr().out
    assert "failed row: A100 image resnet50 fp16 224px batch 4096: FAILED CUDA out of memory" in printed
    table = pd.read_csv(out / "comparison.csv")
    assert table["status"].tolist() == ["ok", "FAILED"]
    assert "CUDA out of memory" in (out / "report.html").read_text()


@pytest.mark.parametrize("base, changes", [(IMAGE_ROW, {}), (LLM_ROW, {"MFU": None})])
def test_estimated_energy_is_labelled_in_every_derived_energy_figure(tmp_path, base, changes):
    path = run_dir(tmp_path, "a", base, [{"EnergySource": "estimated(estimate)", **changes}])
    out = tmp_path / "out"
    assert cli.main([str(path), "--out", str(out), "--no-references"]) == 0
    markdown = next(out.glob("comparison_*.md")).read_text()
    lines = [line for line in markdown.splitlines() if line.startswith("| A100")]
    assert len(lines) == 3  # the comparison row and the two time-to-solution rows
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        numbers_with_wh = [c for c in cells if "(estimated)" in c]
        # Wh/device, Wh/node, per Wh and its ratio, W/device; or energy to solution and energy x time
        assert len(numbers_with_wh) in (5, 2), line
    assert "estimate: extrapolated from the measured rate; energy estimated" in markdown
    if "MFU" in changes:
        assert "| n/a |" in markdown  # the absent MFU


def test_a_run_dir_given_as_system_label_and_as_outpath_of_several_outpaths(tmp_path):
    run_dir(tmp_path / "runs", "a", IMAGE_ROW, [{}])
    run_dir(tmp_path / "runs", "b", IMAGE_ROW, [{"GlobalBatchSize": 512}])
    out = tmp_path / "out"
    assert cli.main([f"Z={tmp_path / 'runs'}", "--out", str(out), "--no-references"]) == 0
    table = pd.read_csv(out / "comparison.csv")
    assert table["system"].tolist() == ["Z", "Z"] and table["global_batch"].tolist() == [256, 512]
