"""The full table a run's rows make (caraml/row/full_table.py): the shared
head and tail and the benchmark's own columns (its entry of the table),
from the row model's rows (the driver's summary line, JUBE's parameters and
the data step as the row model kept them), one line per row."""

from __future__ import annotations

import csv
import io

from caraml.row import full_table, row_json
from caraml.row.decide import decide_row
from caraml.row.evidence import gather
from tests.caraml.row_packages import JPWR, execute, finished_job, run_dir, write


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_a_decided_row_and_one_not_started_each_give_a_line_with_every_column(tmp_path):
    run = run_dir(tmp_path, with_data_step=True)
    work = execute(run)
    write(work, job_out=finished_job())
    (run / "000000_prepare_data" / "work" / "stdout").write_text(
        "CARAML data: name=three_words vocab=300\n"
        "CARAML warning: corpus three_words has only 3 tokens: fewer than one sequence\n")
    (tmp_path / "jpwr.out").write_text(JPWR)
    (tmp_path / "jpwr.err").write_text("")
    combine = run / "000002_combine_energy" / "work"
    combine.mkdir(parents=True)
    row_json.write(decide_row("llm", gather(work, tmp_path / "jpwr.out", tmp_path / "jpwr.err", 0)), combine)
    [line] = _rows(full_table.table(run))
    assert list(line) == [column.title for column in full_table.columns("llm")]
    assert (line["System"], line["Nodes"], line["ModelSize"], line["Status"], line["Error"]) == (
        "A100", "1", "800M", "ok", "")
    # the driver's line, formatted as the column says, and the data step's corpus
    assert (line["TP"], line["Backend"], line["Tokens/s(median)"]) == ("1", "megatron", "104000.0")
    assert line["Data"] == "three_words (only 3 tokens: repeated)"
    # the combine step's energy, and the work package it came from
    assert float(line["Energy(Wh)"]) == 40.0 and line["EnergyScope"] == "gpu"
    assert line["WorkPackage"] == str(work.resolve())


def test_the_file_is_written_into_the_runs_result_folder_and_printed(tmp_path, capsys):
    run = run_dir(tmp_path)
    write(execute(run), stderr="CARAML ERROR: unknown tag A200, systems: CPU\n")
    assert full_table.main([str(tmp_path)]) == 0  # the outpath: its last run
    shown = capsys.readouterr().out
    assert shown == (run / "result" / "result_csv.dat").read_text()
    [line] = _rows(shown)
    # nothing measured: empty cells, the cause whole (the short tables wrap it)
    assert (line["Status"], line["Error"], line["Tokens/s"]) == (
        "failed", "unknown tag A200; systems: CPU", "")


def test_a_folder_without_a_run_is_one_line(tmp_path, capsys):
    assert full_table.main([str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith("CARAML ERROR: the full table could not be written: ")
