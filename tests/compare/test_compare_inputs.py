"""Bad input gives one line on stderr naming the file and the problem, and
exit status 2; a system without a measurement stays in the report with its
causes and makes the exit status 1; nothing read is dropped."""

from __future__ import annotations

import json

import pandas as pd

from caraml.compare import comparison
from tests.compare import rowfixtures as fx


def _error(capsys, argv) -> str:
    assert fx.compare(argv) == comparison.BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("caraml-compare: error: ")
    return err


def test_a_directory_that_is_not_a_jube_run(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    err = _error(capsys, [str(tmp_path / "notes"), "--out", str(tmp_path / "out")])
    assert f"{tmp_path / 'notes'}: not a JUBE run directory" in err
    err = _error(capsys, [str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    assert f"{tmp_path / 'missing'}: no such directory" in err


def test_nothing_measured_at_all_is_bad_input_naming_the_causes(tmp_path, capsys):
    path = fx.write_run(tmp_path, "a", [fx.failed(reason="CUDA out of memory")])
    err = _error(capsys, [str(path), "--out", str(tmp_path / "out")])
    assert "nothing to compare: no row of the 1 system(s) ran (H100: CUDA out of memory)" in err


def test_a_failed_system_stays_in_the_report_and_the_exit_status_is_1(tmp_path, capsys):
    good = fx.write_run(tmp_path, "a100", [fx.a100()])
    bad = fx.write_run(tmp_path, "h100", [fx.failed(reason="CUDA out of memory"),
                                          fx.failed(reason="NCCL timeout", global_batch=1024)])
    out = tmp_path / "out"
    assert fx.compare([str(good), str(bad), "--out", str(out), "--no-references"]) == comparison.SYSTEM_FAILED
    printed = capsys.readouterr().out
    assert ("failed benchmark: H100 llm: no measured row (2 rows: failed: CUDA out of memory; "
            "failed: NCCL timeout)") in printed
    page = (out / "report.html").read_text()
    assert "H100 llm: no measured row" in page and "exit status 1" in printed
    head = pd.read_csv(out / "headline.csv")
    assert head.set_index("system").loc["H100", "reason"] == "CUDA out of memory; NCCL timeout"


def test_a_run_without_row_json_and_an_unreadable_row_become_failed_lines(tmp_path, capsys):
    good = fx.write_run(tmp_path, "a100", [fx.a100()])
    empty = tmp_path / "x" / "000000"
    empty.mkdir(parents=True)
    for marker in ("configuration.xml", "workpackages.xml"):
        (empty / marker).write_text("<jube/>\n")
    old = fx.write_run(tmp_path, "old", [fx.a100()])
    row_file = next(old.glob("*/*/work/row.json"))
    row_file.write_text(json.dumps({"schema": "caraml-row/0"}))
    out = tmp_path / "out"
    assert fx.compare([str(good), f"X={empty.parent}", f"OLD={old}", "--out", str(out),
                     "--no-references"]) == comparison.SYSTEM_FAILED
    table = pd.read_csv(out / "comparison.csv", keep_default_na=False).set_index("system")
    assert table.loc["X", "state"] == "failed"
    assert table.loc["X", "reason"] == (f"{empty} holds no work package: the run stopped before its "
                                        f"first job (jube status {empty.parent})")
    assert table.loc["OLD", "reason"] == (f"{row_file}: schema 'caraml-row/0', not 'caraml-row/2' or "
                                          "'caraml-row/1'; run `jube result -a` with this suite's version")


def test_all_runs_keeps_an_old_failed_run_beside_the_good_one(tmp_path):
    root = tmp_path / "a100"
    fx.write_run(root, "llm", [fx.failed(name="A100", reason="node failure")], run_id=0)
    fx.write_run(root, "llm", [fx.a100()], run_id=1)
    out = tmp_path / "out"
    assert fx.compare([str(root / "llm"), "--all-runs", "--out", str(out), "--no-references"]) == 0
    table = pd.read_csv(out / "comparison.csv")
    assert table["state"].tolist() == ["failed", "ok"]


def test_systems_without_a_common_benchmark(tmp_path, capsys):
    a = fx.write_run(tmp_path, "a", [fx.cpu_image()])
    b = fx.write_run(tmp_path, "b", [fx.a100()])
    err = _error(capsys, [f"X={a}", f"Y={b}", "--out", str(tmp_path / "out")])
    assert "no common benchmark (X ran image; Y ran llm)" in err


def test_an_unknown_reference_system(tmp_path, capsys):
    path = fx.write_run(tmp_path, "a", [fx.a100()])
    err = _error(capsys, [str(path), "--out", str(tmp_path / "out"), "--reference-system", "B"])
    assert "--reference-system B: no measured row of that system given (A100)" in err


def test_a_row_that_stopped_early_is_a_measurement_that_keeps_its_reason(tmp_path):
    path = fx.write_run(tmp_path, "a", [fx.a100(state="ok-stopped-early", reason="walltime after 40 of 90")])
    out = tmp_path / "out"
    assert fx.compare([str(path), "--out", str(out), "--no-references"]) == 0
    markdown = (out / "comparison_llm.md").read_text()
    assert "| ok-stopped-early: walltime after 40 of 90 | 77,600 |" in markdown


def test_estimated_energy_is_labelled_in_every_energy_figure(tmp_path):
    # two runs of the same figures (one run under two names is refused)
    a, b = (fx.write_run(tmp_path, name, [fx.a100(estimated=True)]) for name in ("a", "b"))
    out = tmp_path / "out"
    assert fx.compare([f"A={a}", f"B={b}", "--out", str(out), "--no-references"]) == 0
    lines = (out / "comparison_llm.md").read_text().splitlines()
    head = [line for line in lines if line.startswith("| B ")][0]
    cells = [c.strip() for c in head.strip("|").split("|")]
    # tokens/Wh over the whole run and the timed window, their ratios, mean power and the energy description
    assert [c for c in cells if "estimated" in c] == ["162,000 (estimated)", "194,000 (estimated)",
                                                      "1.00x (no interval, estimated)",
                                                      "1.00x (no interval, estimated)",
                                                      "360 W (estimated)",
                                                      "estimated, scope gpu, timed window, 4 energy "
                                                      "devices (estimate)"]


def test_a_run_path_holding_an_equals_sign_is_compared_with_or_without_a_label(tmp_path):
    from caraml.compare.rows import find_run_dirs

    outpath = fx.write_run(tmp_path / "sweep", "bs=512", [fx.a100()])
    [plain] = find_run_dirs(str(outpath))
    [labelled] = find_run_dirs(f"A100x={outpath}")
    assert (plain.path, plain.system) == (outpath / "000000", None)
    assert (labelled.path, labelled.system) == (outpath / "000000", "A100x")


def test_a_row_of_a_run_still_going_says_why_it_is_no_measurement_yet(tmp_path, capsys):
    good = fx.write_run(tmp_path, "a", [fx.a100()])
    live = fx.write_run(tmp_path, "g", [fx.gh200(state="running")])
    assert fx.compare([f"A100={good}", f"GH200={live}", "--out", str(tmp_path / "out"),
                     "--no-references"]) == 1
    out = capsys.readouterr().out
    assert ("not a measurement: GH200 llm 800M bf16 seq 2048: running: the job has not ended yet: "
            "its row is decided once `jube continue` has seen it end") in out, out
    page = (tmp_path / "out" / "report.html").read_text()
    assert "running: the job has not ended yet" in page


def test_quiet_prints_the_alerts_alone_and_verbose_what_was_read_and_how_long_it_took(tmp_path, capsys,
                                                                                    monkeypatch):
    monkeypatch.delenv("CARAML_LOG_LEVEL", raising=False)
    good = fx.write_run(tmp_path, "a100", [fx.a100()])
    bad = fx.write_run(tmp_path, "h100", [fx.failed(reason="CUDA out of memory")])
    printed = {}
    for level in ("-q", "", "-v"):
        args = [str(good), str(bad), "--out", str(tmp_path / f"out{level}"), "--no-references"]
        assert fx.compare([*args, *filter(None, [level])]) == comparison.SYSTEM_FAILED
        printed[level] = capsys.readouterr().out.replace(str(tmp_path / f"out{level}"), "OUT").splitlines()
    alert = "failed benchmark: H100 llm: no measured row (1 rows: failed: CUDA out of memory)"
    assert printed["-q"] == [alert]
    assert alert in printed[""] and any(line.startswith("wrote ") for line in printed[""])
    assert not any(line.startswith(("computed:", "written:")) for line in printed[""])
    assert set(printed[""]) < set(printed["-v"])
    assert any(line.startswith("computed: 2 rows of 2 systems against A100 in ") for line in printed["-v"])
    assert any(line.startswith("written: ") and " CPU in this process)" in line for line in printed["-v"])
    monkeypatch.setenv("CARAML_LOG_LEVEL", "WARNING")
    assert fx.compare([str(good), str(bad), "--out", str(tmp_path / "env"), "--no-references"]) == 1
    assert capsys.readouterr().out.splitlines() == [alert]
    monkeypatch.setenv("CARAML_LOG_LEVEL", "chatty")
    assert fx.compare([str(good), "--out", str(tmp_path / "bad"), "--no-references"]) == comparison.BAD_INPUT
    assert "caraml-compare: error: CARAML_LOG_LEVEL=chatty is no log level" in capsys.readouterr().err


def test_a_run_with_no_measurement_is_checked_against_the_references_without_a_check(tmp_path, capsys):
    """No measurement, so nothing to check against a band: the report is
    written, its one line names why."""
    path = fx.write_run(tmp_path, "cpu", [fx.smoke("CPU")])
    assert fx.compare([f"CPU={path}", "--out", str(tmp_path / "out")]) == comparison.SYSTEM_FAILED
    printed = capsys.readouterr().out
    assert ("failed benchmark: CPU llm: no measured row (1 rows: not a measurement (4 timed "
            "iterations") in printed
    assert (tmp_path / "out" / "report.html").is_file()
