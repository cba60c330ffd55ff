"""What a job's lines say about its GPUs' power limits, for its row: the
sweep point's record, the limits the devices had at the start against their
defaults, and who put a changed limit back. The row model
(caraml/row_decide.py) asks this module for the row's `power_limit`, its
flags and whether the row is a measurement at all.

The lines, in job.out (caraml/power_limit_run.py, every rank):

    CARAML power limit at start: rank=0 device=gpu0 scope=gpu limit_w=250 default_w=250
    CARAML power limit: rank=0 device=gpu0 scope=gpu mode=suite asked=300 asked_w=300 before_w=400 ...
    ... reported_w=300
    CARAML power limit restored: rank=0 device=gpu0 restored=yes limit_w=400

and in the power guard's file of each node (caraml/power_guard.py), of
which `CARAML power guard end: host=n1 restored=yes|no|none` says whether
it put back, read again, every limit it found changed.

Standard library only (login node)."""

from __future__ import annotations

from caraml.power_limit import (
    DEFAULT,
    GUARD_END,
    RESTORED_SCOPE,
    SET_SCOPE,
    START_SCOPE,
    SUITE,
    asked_w,
    point_tdp_w,
)
from caraml.report import BenchmarkInputError
from caraml.row_facts import kv_lines
from jpwr.gpu.power_limit import TOLERANCE_W


def _lines_by_rank(text: str, scope: str) -> dict[str, dict[str, str]]:
    """The last line of each rank (a job run again appends its lines)."""
    return {line.get("rank", ""): line for line in kv_lines(text, f"CARAML {scope}:")}


def _num(value: str | None) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def guard_outcome(guard_text: str) -> str | None:
    """The power guards' word on the job's limits over all its nodes: "no"
    where one could not put a changed limit back, "yes" where they held
    limits and each put back what had changed, None where no guard held any
    (none ran, or none saw a GPU it could read)."""
    said = {line.get("restored") for line in kv_lines(guard_text, f"CARAML {GUARD_END}:")}
    return "no" if "no" in said else "yes" if "yes" in said else None


def row_part(point: str | None, tdp_w: float | None, job_out: str, scope: str | None = None, *,
             guard: str = "", devices_per_package: int | None = None) -> dict | None:
    """The row's power_limit: None where the job asked for no point, else the
    point, the watts it asks for (per package at package scope), the scope
    and mode the job set it at (None where not given), what rank 0's device
    had before, reported after setting and has as its default, and
    `restored`: whether every rank that set a limit said it put the previous
    one back, or the power guard put it back (true where none changed one);
    `restored_by` says which."""
    if not point:
        return None
    set_lines = _lines_by_rank(job_out, SET_SCOPE)
    restored = _lines_by_rank(job_out, RESTORED_SCOPE)
    first = set_lines.get("0") or next(iter(set_lines.values()), {})
    start = _lines_by_rank(job_out, START_SCOPE)
    try:
        watts = asked_w(point, point_tdp_w(tdp_w, scope, devices_per_package))
    except BenchmarkInputError:
        watts = None
    by_ranks = all(restored.get(rank, {}).get("restored") == "yes" for rank in set_lines)
    by_guard = guard_outcome(guard) == "yes"
    return {"asked": point, "asked_w": watts, "scope": scope or None,
            "mode": first.get("mode") or (SUITE if set_lines else None),
            "before_w": _num(first.get("before_w")),
            "reported_w": _num(first.get("reported_w")),
            "default_w": _num((start.get("0") or {}).get("default_w")),
            "restored": by_ranks or by_guard,
            "restored_by": "ranks" if by_ranks else "guard" if by_guard else None}


def at_start(job_out: str) -> dict[str, float | None]:
    """The provenance's record of every run: the limit rank 0's device had
    at the start, before the job set anything, and its default."""
    line = _lines_by_rank(job_out, START_SCOPE).get("0") or {}
    return {"power_limit_at_start_w": _num(line.get("limit_w")),
            "power_limit_default_w": _num(line.get("default_w"))}


def not_default_at_start(job_out: str) -> list[tuple[str, float, float]]:
    """(rank, limit, default) of each rank whose device's limit was not its
    default at the start of the run, before the job set anything."""
    out = []
    for rank, line in sorted(_lines_by_rank(job_out, START_SCOPE).items()):
        limit, default = _num(line.get("limit_w")), _num(line.get("default_w"))
        if limit is not None and default is not None and abs(limit - default) > TOLERANCE_W:
            out.append((rank, limit, default))
    return out


def start_flag(job_out: str) -> list[str]:
    """`power-limit-not-default-at-start(180W-not-250W-on-ranks-0-1)`, one
    group per limit and default, where a device began away from its default."""
    groups: dict[tuple[float, float], list[str]] = {}
    for rank, limit, default in not_default_at_start(job_out):
        groups.setdefault((limit, default), []).append(rank)
    return [f"power-limit-not-default-at-start({limit:g}W-not-{default:g}W-on-ranks-{'-'.join(ranks)})"
            for (limit, default), ranks in groups.items()]


def row_flags(part: dict | None, job_out: str, measured: bool = True) -> list[str]:
    """Doubt about a row's limits, one word each. Every row: a limit not put
    back (by the ranks nor by the guard), devices that began away from their
    default. A measured row also: a limit the job never set (a driver that
    takes none), devices that reported other limits than rank 0's, a limit
    a stop signal put back before the run's last iteration ended."""
    left = ["power-limit-not-restored"] if part is not None and not part["restored"] else []
    node = left + start_flag(job_out)
    if part is None or not measured:
        return node
    set_lines = _lines_by_rank(job_out, SET_SCOPE)
    if not set_lines:
        return ["power-limit-not-set"] + start_flag(job_out)
    first = set_lines.get("0") or next(iter(set_lines.values()))
    differ = sorted(rank for rank, line in set_lines.items()
                    if line.get("reported_w") != first.get("reported_w"))
    return node + ([f"power-limit-differs-on-ranks({'-'.join(differ)})"] if differ else []) \
        + put_back_early(job_out)


def put_back_early(job_out: str) -> list[str]:
    """`power-limit-put-back-early(SIGTERM)`: a stop signal put the limit back
    while the run went on to the end of its iteration, which the timed
    window counts at the limit put back, not at the point's."""
    signals = sorted({line["when"] for line in kv_lines(job_out, f"CARAML {RESTORED_SCOPE}:")
                      if line.get("when")})
    return [f"power-limit-put-back-early({'-'.join(signals)})"] if signals else []


def not_a_measurement(part: dict | None, job_out: str) -> str | None:
    """Why a row is no measurement for its power limit, in one line; None
    where it may be one. A `default` point on a device that began away from
    its default measured another limit than its name says; a point the job
    set itself (mode suite) on such a device came after a limit that was not
    put back (by an earlier point or job), on a node in a state the sweep
    did not make. A plain run is flagged only (it ran at the limit the node
    had); a point the centre set (mode external) is the centre's limit."""
    off = not_default_at_start(job_out)
    if part is None or not off or not (part["asked"] == DEFAULT or part["mode"] == SUITE):
        return None
    rank, limit, default = off[0]
    which = "the default point" if part["asked"] == DEFAULT else "a point set after it"
    return (f"the power limit was {limit:g} W at the job's start and not the device's default "
            f"{default:g} W (rank {rank}; {len(off)} rank(s) in all): a limit left by an earlier "
            f"point or job that was not put back; {which} is no measurement; reset the node's "
            "limits (the epilog site/slurm-epilog-power-limits.sh or nvidia-smi -i N -pl W as "
            "root) and run it again")
