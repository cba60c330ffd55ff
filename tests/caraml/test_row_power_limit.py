"""What a job's power-limit lines make of its row (caraml/row/power_limit.py,
through the row model): the limit every run found at its start against the
device's default, the flag where they differ, the one verdict
(caraml/row/verdict.py) that a run on such a device is no measurement
unless the centre set its point, and who put a changed limit back: the
ranks, or the power guard where a rank was killed;
`power-limit-not-restored` only where both failed."""

from __future__ import annotations

import pytest

from caraml.row.decide import decide_row
from caraml.row.evidence import gather
from tests.caraml.row_packages import JPWR, execute, finished_job, run_dir

START = "CARAML power limit at start: rank={rank} device=gpu{rank} scope=gpu limit_w={limit} default_w=250\n"
SET = ("CARAML power limit: rank={rank} device=gpu{rank} scope=gpu mode={mode} asked={asked} "
       "asked_w={watts} before_w={limit} reported_w={reported}\n")
RESTORED = "CARAML power limit restored: rank={rank} device=gpu{rank} restored={ok} limit_w={limit}\n"
GUARD = ("CARAML power guard: host=cn1 device=gpu0 scope=gpu found_w=250 default_w=250\n"
         "CARAML power guard ready: host=cn1 limits=1\n"
         "CARAML power guard restored: host=cn1 device=gpu0 scope=gpu found_w=250 was_w=180 reads_w={reads} "
         "restored={ok}\n"
         "CARAML power guard end: host=cn1 restored={ok} when=SIGTERM\n")
KILLED = ("\nRoot Cause (first observed failure):\n[0]:\n  host      : cn1\n  rank      : 0 (local_rank: 0)\n"
          "  exitcode  : -9 (pid: 4242)  (SIGKILL)\n")


def _row(tmp_path, job_out: str, point: str | None = None, guard: str | None = None, **files):
    run = run_dir(tmp_path, {"power_limit": point} if point else {})
    work = execute(run)
    (work / "job.out").write_text(job_out)
    for name, text in files.items():
        (work / name.replace("_", ".")).write_text(text)
    if guard is not None:
        (work / "power_guard.cn1").write_text(guard)
    (tmp_path / "jpwr.out").write_text(JPWR)
    (tmp_path / "jpwr.err").write_text("")
    ev = gather(work, tmp_path / "jpwr.out", tmp_path / "jpwr.err", 0)
    return decide_row("llm", ev, slurm_state=lambda job_id: None)


def _point(asked: str, limit: int, mode: str = "suite", ranks: int = 1) -> str:
    watts = "-" if asked == "default" else asked
    reported = limit if asked == "default" else asked
    return "".join(START.format(rank=r, limit=limit) + SET.format(
        rank=r, mode=mode, asked=asked, watts=watts, limit=limit, reported=reported)
        + RESTORED.format(rank=r, ok="yes", limit=limit) for r in range(ranks))


OFF = "its devices' power limit was not their default at the job's start (180W-not-250W-on-ranks-0"


def test_a_run_records_its_start_and_one_on_a_capped_device_is_no_measurement(tmp_path):
    row = _row(tmp_path / "at", START.format(rank=0, limit=250) + finished_job())
    assert row.state == "ok" and list(row.flags) == [] and row.not_a_measurement == ""
    assert (row.power_limit_at_start_w, row.power_limit_default_w) == (250.0, 250.0)
    # a plain run on a device left capped ran at a limit nobody asked for: a row after a point
    # (or job) that did not put its limit back
    row = _row(tmp_path / "capped", START.format(rank=0, limit=180) + finished_job())
    assert row.state == "ok" and not row.measurement and row.not_a_measurement.startswith(OFF + ")")
    assert list(row.flags) == ["power-limit-not-default-at-start(180W-not-250W-on-ranks-0)"]


def test_the_default_point_on_a_capped_device_is_no_measurement(tmp_path):
    row = _row(tmp_path, _point("default", 180, ranks=2) + finished_job(), point="default")
    assert row.state == "ok" and row.per_s is not None  # what it measured is kept
    assert not row.measurement and row.not_a_measurement.startswith(OFF + "-1): a limit left by an "
                                                                          "earlier point or job")
    assert list(row.flags) == ["power-limit-not-default-at-start(180W-not-250W-on-ranks-0-1)"]
    assert (row.power_limit_default_w, row.power_limit_w) == (250.0, 180.0)


@pytest.mark.parametrize("mode, measurement", [("suite", False), ("external", True)])
def test_a_point_after_a_limit_left_behind_is_no_measurement_unless_the_centre_set_it(
        tmp_path, mode, measurement):
    row = _row(tmp_path, _point("200", 180, mode=mode) + finished_job(), point="200")
    assert row.measurement is measurement, row.not_a_measurement
    assert row.power_limit_mode == mode
    assert "power-limit-not-default-at-start(180W-not-250W-on-ranks-0)" in row.flags


def _killed_rank(ok_guard: str | None) -> tuple[str, str | None]:
    """A point whose rank 0 set 180 W and was killed outright: no restored line of its own."""
    out = (START.format(rank=0, limit=250) + SET.format(rank=0, mode="suite", asked="180", watts="180",
                                                         limit=250, reported="180")
           + "CARAML job: start=2026-11-24T05:00:00+00:00 host=cn1 job_id=none\n"
           + "CARAML job: end=2026-11-24T05:01:00+00:00 status=1\n")
    guard = None if ok_guard is None else GUARD.format(ok=ok_guard, reads=250 if ok_guard == "yes" else 180)
    return out, guard


@pytest.mark.parametrize("guard_says, restored, by, flagged", [
    ("yes", True, "guard", False), ("no", False, None, True), (None, False, None, True)])
def test_a_killed_ranks_limit_is_not_restored_only_where_the_guard_failed_too(
        tmp_path, guard_says, restored, by, flagged):
    out, guard = _killed_rank(guard_says)
    row = _row(tmp_path, out, point="180", guard=guard, job_err=KILLED,
               error="job exited with status 1: rank 0 killed by SIGKILL on cn1 (not by the OOM killer: "
                     "the kernel's log names no killed rank)\n")
    assert row.state == "failed"
    assert (row.power_limit_restored, row.power_limit_restored_by) == (restored, by)
    # a failed row carries what it left on the node
    assert ("power-limit-not-restored" in row.flags) is flagged



def test_the_guards_no_stands_over_the_ranks_yes(tmp_path):
    """The guard reads the limits once every process of the job is gone: a
    limit it found changed and could not put back is not restored, whatever
    the ranks said before."""
    out = (_point("180", 250) + "CARAML job: start=2026-11-24T05:00:00+00:00 host=cn1 job_id=none\n"
           + "CARAML job: end=2026-11-24T05:01:00+00:00 status=0\n")
    row = _row(tmp_path, out, point="180", guard=GUARD.format(ok="no", reads=180))
    assert (row.power_limit_restored, row.power_limit_restored_by) == (False, None)
    assert "power-limit-not-restored" in row.flags
    row = _row(tmp_path / "kept", out, point="180", guard=GUARD.format(ok="yes", reads=250))
    assert (row.power_limit_restored, row.power_limit_restored_by) == (True, "ranks")

def test_a_limit_a_signal_put_back_before_the_run_ended_puts_the_point_in_doubt(tmp_path):
    from caraml.compare import frontier
    out = _point("150", 250).replace("limit_w=250\n", "limit_w=250 when=SIGTERM\n", 1) + \
        RESTORED.format(rank=0, ok="yes", limit=250) + finished_job(stop="signal SIGTERM")
    row = _row(tmp_path, out, point="150")
    assert row.state == "ok-stopped-early"
    assert list(row.flags) == ["power-limit-put-back-early(SIGTERM)"]
    assert frontier.DOUBTS["power-limit-put-back-early"].format("SIGTERM") == \
        "a stop signal (SIGTERM) put the limit back before the last iteration ended"
