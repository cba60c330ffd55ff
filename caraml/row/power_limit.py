"""A power-limit sweep's point in the row (caraml/power_limit.py: the
points; each rank's lines `CARAML power limit:` and `CARAML power limit
restored:`, which the driver core prints): the limit as asked, its watts,
the scope, what rank 0's device had before and reported after, whether
every rank put it back, and the doubts about it. Standard library only
(login node)."""

from __future__ import annotations

from caraml.power_limit import RESTORED_SCOPE, SET_SCOPE, asked_w
from caraml.report import BenchmarkInputError, kv_lines

NONE = {"power_limit": None, "power_limit_asked_w": None, "power_limit_scope": None,
        "power_limit_before_w": None, "power_limit_w": None, "power_limit_restored": None}


def _lines_by_rank(text: str, scope: str) -> dict[str, dict[str, str]]:
    """The last line of each rank (a job run again appends its lines)."""
    return {line.get("rank", ""): line for line in kv_lines(text, f"CARAML {scope}:")}


def _num(value: str | None) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def fields(point: str | None, tdp_w: float | None, job_out: str, scope: str | None = None) -> dict:
    """The row's power-limit fields: none where the job asked for no point,
    else the point, the watts it asks for, the scope the job set it at (gpu
    or module; None where not given), and what rank 0's device had before
    and reported after setting; restored: whether every rank that set a
    limit said it put the previous one back (true where none changed one)."""
    if not point:
        return NONE
    set_lines = _lines_by_rank(job_out, SET_SCOPE)
    restored = _lines_by_rank(job_out, RESTORED_SCOPE)
    first = set_lines.get("0") or next(iter(set_lines.values()), {})
    try:
        watts = asked_w(point, tdp_w)
    except BenchmarkInputError:
        watts = None
    return {"power_limit": point, "power_limit_asked_w": watts, "power_limit_scope": scope or None,
            "power_limit_before_w": _num(first.get("before_w")),
            "power_limit_w": _num(first.get("reported_w")),
            "power_limit_restored": all(restored.get(rank, {}).get("restored") == "yes"
                                        for rank in set_lines)}


def flags(limit: dict, job_out: str) -> list[str]:
    """Doubt about a measured row's limit, one word each: a limit the job
    never set (a driver that takes none), one not put back, and devices
    that reported other limits than rank 0's."""
    if limit["power_limit"] is None:
        return []
    set_lines = _lines_by_rank(job_out, SET_SCOPE)
    if not set_lines:
        return ["power-limit-not-set"]
    out = [] if limit["power_limit_restored"] else ["power-limit-not-restored"]
    first = set_lines.get("0") or next(iter(set_lines.values()))
    differ = sorted(rank for rank, line in set_lines.items()
                    if line.get("reported_w") != first.get("reported_w"))
    if differ:
        out.append(f"power-limit-differs-on-ranks({'-'.join(differ)})")
    return out
