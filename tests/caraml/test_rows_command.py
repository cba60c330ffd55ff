"""The README's main command's verdict (caraml/login/rows.py) is the row
model's: a row the combine step decided is read from its row.json, a row
whose combine step never ran is decided from the job's files, and only a
row whose job ran to its figures (a measurement or not: the tables say
which) or a dry run passes."""

from __future__ import annotations

import dataclasses

from caraml.login import rows
from caraml.row import combine, row_json
from caraml.row.decide import decide_row
from caraml.row.evidence import gather
from tests.caraml.row_packages import execute, finished_job, run_dir, write


def _combine(run, row):
    work = run / "000002_combine_energy" / "work"
    work.mkdir(parents=True)
    row_json.write(row, work)


def test_a_stopped_early_row_decided_by_the_combine_step_passes(tmp_path, capsys):
    run = run_dir(tmp_path)
    write(execute(run), job_out=finished_job(stop="signal SIGUSR1"))
    row = decide_row("llm", gather(execute(run)))
    assert row.state == "ok-stopped-early"
    _combine(run, row)
    assert rows.main([str(run)]) == 0
    assert capsys.readouterr().err == ""


def test_the_combine_steps_decision_is_the_one_read(tmp_path, capsys):
    run = run_dir(tmp_path)
    write(execute(run), job_out=finished_job())
    row = dataclasses.replace(decide_row("llm", gather(execute(run))), state="failed",
                              reason="energy not combined: jpwr says no")
    _combine(run, row)
    assert rows.main([str(run)]) == 1
    assert "CARAML: row 1 (800M bf16 batch 512 on A100): failed: energy not combined: " \
        "jpwr says no" in capsys.readouterr().err


def test_a_row_the_combine_step_never_saw_is_decided_from_the_jobs_files(tmp_path, capsys):
    run = run_dir(tmp_path)
    write(execute(run), stderr="CARAML ERROR: unknown tag A200\n")
    assert rows.main([str(run)]) == 1
    assert "failed: unknown tag A200" in capsys.readouterr().err


def test_a_dry_run_passes_and_a_queued_job_does_not(tmp_path, capsys):
    dry = run_dir(tmp_path / "dry")
    write(execute(dry), stderr="CARAML dryrun: job.sh written and not submitted\n")
    assert rows.main([str(dry)]) == 0
    queued = run_dir(tmp_path / "queued")
    assert rows.main([str(queued)]) == 1
    assert ": queued" in capsys.readouterr().err


def test_a_folder_that_is_no_run_says_so(tmp_path, capsys):
    assert rows.main([str(tmp_path)]) == 1
    assert "no JUBE run directory" in capsys.readouterr().err


def test_a_work_package_the_model_cannot_read_is_a_failed_row_that_says_why(tmp_path, capsys,
                                                                          monkeypatch):
    run = run_dir(tmp_path)
    write(execute(run), job_out=finished_job(), stderr="")
    (run / "workpackages.xml").write_text("<workpackages>")  # cut short
    assert rows.main([str(run)]) == 1
    assert "failed: the row model could not decide this row (ParseError" in capsys.readouterr().err
    # the combine step prints a failed row for the tables instead of stopping
    step = run / "000002_combine_energy" / "work"
    step.mkdir(parents=True)
    (step / "execute").symlink_to(execute(run))
    for name in ("jpwr.out", "jpwr.err"):
        (step / name).write_text("")
    monkeypatch.chdir(step)
    assert combine.main(["--benchmark", "llm", "jpwr.out", "jpwr.err"]) == 0
    out = capsys.readouterr()
    assert "CARAML row: state=failed" in out.out and "CARAML ERROR: the row model could not" in out.err
