"""The row's lines before its combine step (caraml/row/row_out.py) and a
container build's status (caraml/row/status.py, decide_build): what JUBE's
tables show while a job is queued, running, refused or building."""

from __future__ import annotations

import pytest

from caraml.row import row_out
from caraml.row.evidence import Evidence
from caraml.row.status import BUILD_STATES, decide_build
from tests.caraml.row_packages import START, execute, finished_job, run_dir, write

END = "CARAML job: end=2026-11-26T10:30:00+00:00 status={}"
DRY = "CARAML dryrun: /runs/r/000000/000000_build_container/work/job.sh written and not submitted\n"


@pytest.mark.parametrize("texts, expected", [
    ({}, ("queued", "")),
    ({"stderr": DRY}, ("dry-run", "job script 000000/000000_build_container/work/job.sh written "
                                  "and not submitted")),
    ({"job.out": START + "\n"}, ("building", "")),
    ({"job.out": f"{START}\n{END.format(0)}\n"}, ("built", "")),
    ({"job.out": f"{START}\n{END.format(1)}\n"}, ("failed", "job exited with status 1")),
    ({"stderr": "CARAML ERROR: CPU has no container: nothing to build\n"},
     ("failed", "CPU has no container: nothing to build")),
    ({"job.out": START + "\n", "error": "job exited with status 137 (SIGKILL)\n"},
     ("failed", "job exited with status 137 (SIGKILL)")),
], ids=["queued", "dry-run", "building", "built", "exit-1", "refused", "killed"])
def test_a_container_build_is_decided_from_its_job(texts, expected):
    status = decide_build(Evidence(texts))
    assert (status.state, status.reason) == expected


def test_every_build_state_is_reached_above():
    assert set(BUILD_STATES) == {"built", "failed", "dry-run", "queued", "building"}


def _lines(work):
    return (work / row_out.LINES_FILE).read_text().splitlines()


def test_the_line_says_where_a_job_stands_and_makes_jubes_analysis_stale(tmp_path):
    run = run_dir(tmp_path)
    work = execute(run)
    cache = run / row_out.ANALYSIS_CACHE
    for job_out, state in (("", "queued"), (START + "\n", "running"), (finished_job(), "ok")):
        cache.write_text("<analyse/>")
        write(work, job_out=job_out)
        row_out.write(work)
        assert _lines(work)[0].startswith(f"CARAML row: state={state} ")
        assert not cache.exists()
    # the same lines the combine step prints: the model's figures are in it
    assert " per_s=104858 " in _lines(work)[0] and _lines(work)[1:] == [
        "CARAML row status: ok", "CARAML row reason: ", "CARAML row flags: none"]


def test_a_refusal_is_a_failed_line_and_the_step_keeps_its_status(tmp_path):
    work = execute(run_dir(tmp_path))
    write(work, stderr="CARAML ERROR: unknown tag A200; systems: CPU, LOCAL, A100, H100\n")
    assert row_out.main(["--exit-status", "3", str(work)]) == 3
    # a long reason goes on over lines of two spaces' indent: one cell of JUBE's issues table
    line, status, *cause = _lines(work)[:4]
    assert line.startswith("CARAML row: state=failed notable=yes layout=1x4 ")
    assert status == "CARAML row status: failed"
    assert {"model=800M", "precision=fp16", "measurement=no"} <= set(line.split())
    assert cause == ["CARAML row reason: unknown tag A200; systems: CPU;", "  LOCAL; A100; H100"]


def test_a_build_job_writes_its_build_status(tmp_path):
    work = execute(run_dir(tmp_path, {"building_container": "yes"}))
    write(work, job_out=START + "\n")
    row_out.write(work)
    assert _lines(work) == ["CARAML row: state=building notable=yes", "CARAML row status: building",
                            "CARAML row reason: ", "CARAML row flags: none"]


def test_a_work_package_jube_has_no_record_of_is_a_failed_line(tmp_path):
    work = tmp_path / "000000" / "000004_execute" / "work"
    work.mkdir(parents=True)
    assert row_out.main([str(work)]) == 0
    assert _lines(work)[0].startswith("CARAML row: state=failed ")
    assert "the row model could not decide" in _lines(work)[2]
