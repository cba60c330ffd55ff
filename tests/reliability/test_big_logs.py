"""A job's logs are read as streams, with memory bounded whatever their size
(caraml/job/log.py read_log): a job.out of many progress lines (a driver
left at a chatty log level, a run of days) does not stall the row step or
the job script's exit handler, and the lines they read are still found,
at its end and between its edges. The memory a read takes is measured with
tracemalloc; the time a 1.5 GB job.out takes: aux/perf/big_log.py."""

from __future__ import annotations

import tracemalloc

import pytest

from caraml.job import failure
from caraml.row.decide import decide_row
from caraml.row.evidence import gather
from tests.caraml.row_packages import JPWR, LLM_GLOBAL, PROVENANCE, START, execute, finished_job, run_dir

# far more than the whole-log limit, and far more than the memory the read may take
LOG_MB = 64
BOUND_MB = LOG_MB // 2
PROGRESS = b"iteration 41/100: loss 7.0312 time 10.02 s tokens/s 104857.6 memory 61.2 GiB\n"


def chatty(path, middle: bytes = b"", end: str = "") -> None:
    """`path` as a job's log: its start lines, LOG_MB of progress lines with
    `middle` half-way, then `end`."""
    chunk = PROGRESS * (2**20 // len(PROGRESS))
    with open(path, "wb") as log:
        log.write(f"{START}\n{PROVENANCE}\n".encode())
        for mb in range(LOG_MB):
            log.write(chunk)
            if mb == LOG_MB // 2:
                log.write(middle)
        log.write(end.encode())


def peak_mb(call):
    """(call's result, the most memory Python held during it, in MB)."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _decide(tmp_path):
    work = execute(run_dir(tmp_path))
    (tmp_path / "jpwr.out").write_text(JPWR)
    (tmp_path / "jpwr.err").write_text("")
    return work, lambda: decide_row("llm", gather(work, tmp_path / "jpwr.out", tmp_path / "jpwr.err", 0),
                                    slurm_state=lambda job_id: None)


def test_a_huge_job_out_is_decided_in_bounded_memory(tmp_path):
    work, decide = _decide(tmp_path)
    chatty(work / "job.out", end=finished_job().split("\n", 1)[1])
    chatty(work / "job.err")
    row, peak = peak_mb(decide)
    assert peak < BOUND_MB, f"deciding the row held {peak:.0f} MB for {2 * LOG_MB} MB of logs"
    assert (row.state, row.reason) == ("ok", "")
    assert row.per_s == pytest.approx(104857.6) and row.commit == "1d3448ffe2ac"


def test_an_error_half_way_through_a_huge_log_still_fails_the_row(tmp_path):
    work, decide = _decide(tmp_path)
    chatty(work / "job.out", end=f"{LLM_GLOBAL}\nCARAML job: end=2026-11-24T05:10:00+00:00 status=1\n")
    chatty(work / "job.err", middle=b"CARAML ERROR: rank 3: the data loader's worker died\n")
    row, peak = peak_mb(decide)
    assert peak < BOUND_MB
    assert (row.state, row.reason) == ("failed", "rank 3: the data loader's worker died")


def test_the_exit_handlers_cause_of_a_huge_log_in_bounded_memory(tmp_path):
    log = tmp_path / "job.err"
    chatty(log, end="Traceback (most recent call last):\n  File \"/x/train.py\", line 7, in step\n"
                    "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    line, peak = peak_mb(lambda: failure.summary(1, [log]))
    assert peak < BOUND_MB
    assert line == ("job exited with status 1: RuntimeError: CUDA error: an illegal memory access "
                    "was encountered")
