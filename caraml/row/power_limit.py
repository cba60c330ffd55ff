"""What a job's lines say about its GPUs' power limits, as the row's fields
(caraml/row/record.py) and the flags they raise. Whether such a row is a
measurement is the one verdict's (caraml/row/verdict.py).

The lines, in job.out (caraml/node/power_limit_run.py, every rank):

    CARAML power limit at start: rank=0 device=gpu0 scope=gpu limit_w=250 default_w=250
    CARAML power limit: rank=0 device=gpu0 scope=gpu mode=suite asked=300 asked_w=300 before_w=400 ...
    ... reported_w=300
    CARAML power limit restored: rank=0 device=gpu0 restored=yes limit_w=400

and in the power guard's file of each node (caraml/job/power_guard.py),
of which `CARAML power guard end: host=n1 restored=yes|no|none` says
whether it put back, read again, every limit it found changed.

Standard library only (login node)."""

from __future__ import annotations

from caraml.power_limit import GUARD_END, RESTORED_SCOPE, SET_SCOPE, START_SCOPE, SUITE, asked_w, point_tdp_w
from caraml.report import BenchmarkInputError, kv_lines
from jpwr.gpu.power_limit import TOLERANCE_W

POINT_NONE = {"power_limit": None, "power_limit_asked_w": None, "power_limit_scope": None,
              "power_limit_mode": None, "power_limit_before_w": None, "power_limit_w": None,
              "power_limit_restored": None, "power_limit_restored_by": None,
              "power_limit_differs_on_ranks": (), "power_limit_put_back_early": ()}


def _lines_by_rank(text: str, scope: str) -> dict[str, dict[str, str]]:
    """The last line of each rank (a job run again appends its lines)."""
    return {line.get("rank", ""): line for line in kv_lines(text, f"CARAML {scope}:")}


def _num(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def guard_outcome(guard_text: str) -> str | None:
    """The power guards' word on the job's limits over all its nodes: "no"
    where one could not put a changed limit back, "yes" where they held
    limits and each put back what had changed, None where no guard held any
    (none ran, or none saw a GPU it could read)."""
    said = {line.get("restored") for line in kv_lines(guard_text, f"CARAML {GUARD_END}:")}
    return "no" if "no" in said else "yes" if "yes" in said else None


def fields(point: str | None, tdp_w: float | None, job_out: str, scope: str | None = None, *,
           guard: str = "", devices_per_package: int | None = None) -> dict:
    """The row's power-limit fields. Every run: the limit rank 0's device had
    at the start, before the job set anything, its default, and the ranks
    whose device began away from its default. A sweep's point besides: the
    point, the watts it asks for (per package at package scope), the scope
    and the mode it was set in (mode None where no rank said it set or
    checked one), what rank 0's device had before and reported after, and
    `restored`: whether every rank that set a limit put the previous one
    back, or the power guard did (true where none changed one; false where
    the guard found a limit it could not put back); `restored_by`
    says which; the ranks that reported another limit than rank 0's; the
    stop signals that put the limit back before the run's last iteration."""
    start = _lines_by_rank(job_out, START_SCOPE)
    first_start = start.get("0") or {}
    every_run = {"power_limit_at_start_w": _num(first_start.get("limit_w")),
                 "power_limit_default_w": _num(first_start.get("default_w")),
                 "power_limit_not_default_at_start": _not_default(start)}
    if not point:
        return {**POINT_NONE, **every_run}
    set_lines = _lines_by_rank(job_out, SET_SCOPE)
    restored = _lines_by_rank(job_out, RESTORED_SCOPE)
    first = set_lines.get("0") or next(iter(set_lines.values()), {})
    try:
        watts = asked_w(point, point_tdp_w(tdp_w, scope, devices_per_package))
    except BenchmarkInputError:
        watts = None
    # the guard reads the limits once every process of the job is gone: its
    # "no" stands whatever the ranks said before (a rank killed before its line)
    guard_said = guard_outcome(guard)
    by_ranks = guard_said != "no" and all(restored.get(rank, {}).get("restored") == "yes"
                                          for rank in set_lines)
    by_guard = guard_said == "yes"
    early = sorted({line["when"] for line in kv_lines(job_out, f"CARAML {RESTORED_SCOPE}:")
                    if line.get("when")})
    return {**every_run, "power_limit": point, "power_limit_asked_w": watts,
            "power_limit_scope": scope or None,
            "power_limit_mode": first.get("mode") or (SUITE if set_lines else None),
            "power_limit_before_w": _num(first.get("before_w")),
            "power_limit_w": _num(first.get("reported_w")),
            "power_limit_restored": by_ranks or by_guard,
            "power_limit_restored_by": "ranks" if by_ranks else "guard" if by_guard else None,
            "power_limit_differs_on_ranks": tuple(sorted(
                rank for rank, line in set_lines.items()
                if line.get("reported_w") != first.get("reported_w"))),
            "power_limit_put_back_early": tuple(early)}


def _not_default(start: dict[str, dict[str, str]]) -> tuple[str, ...]:
    """`180W-not-250W-on-ranks-0-1`, one group per limit and default, where
    a device began away from its default."""
    groups: dict[tuple[float, float], list[str]] = {}
    for rank, line in sorted(start.items()):
        limit, default = _num(line.get("limit_w")), _num(line.get("default_w"))
        if limit is not None and default is not None and abs(limit - default) > TOLERANCE_W:
            groups.setdefault((limit, default), []).append(rank)
    return tuple(f"{limit:g}W-not-{default:g}W-on-ranks-{'-'.join(ranks)}"
                 for (limit, default), ranks in groups.items())


def flags(limit: dict, measured: bool) -> list[str]:
    """Doubt about a row's limits from its fields, one word each. Every row:
    a limit put back by neither the ranks nor the guard, devices that began
    away from their default. A row whose job ran to its figures also: a
    point's limit the job never set (a driver that takes none), devices that
    reported other limits than rank 0's, a limit a stop signal put back
    before the run's last iteration ended (the timed window counts it at the
    limit put back, not at the point's)."""
    point = limit["power_limit"] is not None
    out = ["power-limit-not-restored"] if point and limit["power_limit_restored"] is False else []
    out += [f"power-limit-not-default-at-start({group})"
            for group in limit["power_limit_not_default_at_start"]]
    if not point or not measured:
        return out
    if limit["power_limit_mode"] is None:
        return ["power-limit-not-set", *out]
    differ, early = limit["power_limit_differs_on_ranks"], limit["power_limit_put_back_early"]
    return out + ([f"power-limit-differs-on-ranks({'-'.join(differ)})"] if differ else []) \
        + ([f"power-limit-put-back-early({'-'.join(early)})"] if early else [])
