"""What the row model reads from the lines a run left: the driver's
`CARAML <scope>: key=value` lines (caraml/report.py) and the energy lines of
`jpwr combine` (jpwr-summary, jpwr-scope, jpwr-window, jpwr-scopes,
jpwr-hosts), and the job's node energy as its file gives it
(caraml/job/node_energy.py). Standard library only (login node)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from caraml.job.node_energy import MEASURED, NodeEnergy
from caraml.report import contended_peak_refusal, kv, kv_lines, last_kv
from caraml.row.record import gpu_work_per_wh


def _value(text: str | None) -> str | None:
    return None if text in (None, "", "-") else text


def provenance(job_out: str) -> dict:
    """The row's provenance from the driver's provenance line and the job
    script's start line."""
    line = last_kv(job_out, "provenance")
    starts = [line for line in kv_lines(job_out, "CARAML job:") if "start" in line]
    job = starts[-1] if starts else {}
    commit = _value(line.get("commit"))
    clean = {"yes": True, "no": False}.get(line.get("clean", ""))
    return {"commit": commit, "clean": clean,
            "suite_version": None if commit is None
            else commit[:12] + ("" if clean is not False else "+changes"),
            "torch": _value(line.get("torch")), "cuda": _value(line.get("cuda")),
            "rocm": _value(line.get("rocm")), "date": _value(job.get("start")),
            "node_host": _value(job.get("host")),
            "driver": _value(line.get("driver")), "container": _value(line.get("container")),
            # ROCm's TF32 switch as the run had it (caraml/rocm_tf32.py)
            "hipblaslt_allow_tf32": _value(line.get("hipblaslt_allow_tf32"))}


def measured_peak(g: dict[str, str]) -> dict:
    """The windows behind a measured matmul-rate peak (the LLM driver's
    matmul_rate.py: the best window is kept): how many, the slowest, the
    median and the spread; none where the peak was not measured."""
    windows = _num(g.get("peak_windows"))
    if g.get("peak_basis") != "measured-matmul" or not windows:
        return {}
    return {"peak_windows": int(windows), "peak_min_tflops": _num(g.get("peak_min_tflops")),
            "peak_median_tflops": _num(g.get("peak_median_tflops")),
            "peak_spread_pct": _num(g.get("peak_spread_pct"))}


def mfu_refusal(g: dict[str, str], at_end: dict[str, str]) -> str | None:
    """Why the row has no MFU, or None: the driver refused its measured peak
    (the LLM driver's metrics.py, which refuses one measured under
    contention as well), or, for a job whose driver did not yet, other
    processes kept the host busy while it trained (at_end: the `host at
    end` line; report.contended_peak_refusal)."""
    why = _value(g.get("mfu_unavailable"))
    if why:
        return why
    if g.get("peak_basis") == "measured-matmul":
        return contended_peak_refusal(_num(at_end.get("foreign_cpu_pct")))
    return None


@dataclass(frozen=True)
class Facts:
    """What the energy headline needs besides jpwr's lines: the scope the
    system asks for ("counted": what jpwr counts per host) and the work."""

    scope_asked: str
    work_total: float | None
    work_timed: float | None


def _num(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number == number else None


def _window(name: str, wh: float | None, devices: int | None, seconds: float | None,
            work: float | None, complete: bool, answered_w: float | None = None) -> dict:
    """One energy window's figures under the record's names (wh_<name>, ...).
    A window that is not whole keeps its partial Wh (labelled: the row's
    energy source says incomplete) and has no work per Wh, so it is never a
    headline ratio. Its power per device is jpwr's, from the samples the
    sensors answered (answered_w), where given: a gap adds no energy, so Wh
    over the whole window would read low."""
    per_device = wh / devices if wh is not None and devices else None
    complete = complete and wh is not None
    if answered_w is None and per_device is not None and seconds:
        answered_w = per_device * 3600 / seconds
    return {f"wh_{name}": wh, f"wh_per_device_{name}": per_device,
            f"work_per_wh_{name}": work / wh if work is not None and wh and complete else None,
            f"power_w_per_device_{name}": answered_w,
            f"window_s_{name}": seconds, f"energy_complete_{name}": complete}


HEADLINE = ("wh", "wh_per_device", "work_per_wh", "power_w_per_device", "window_s")


def headline(fields: dict, window: str) -> dict:
    """The energy fields with the headline window's figures under the plain names."""
    return {**fields, "energy_window": window, **{name: fields.get(f"{name}_{window}") for name in HEADLINE}}


def energy(jpwr_text: str, facts: Facts) -> dict:
    """The energy fields of a row; none where jpwr printed no summary."""
    summaries = kv_lines(jpwr_text, "jpwr-summary:")
    if not summaries:
        return {}
    s = summaries[-1]
    scopes = {line.get("scope"): line for line in kv_lines(jpwr_text, "jpwr-scope:")}
    windows = kv_lines(jpwr_text, "jpwr-window:")
    counted = facts.scope_asked == "counted"
    scope = s.get("scope") if counted else facts.scope_asked
    if counted:
        wh, devices = _num(s.get("total_wh")), _num(s.get("devices"))
    else:
        wh, devices = _num(scopes.get(scope, {}).get("total_wh")), \
            _num(scopes.get(scope, {}).get("devices"))
    timed = next((w for w in windows if w.get("window") == "timed"
                  and (w.get("counted") == "yes" if counted else w.get("scope") == scope)), None)
    missing = _num(s.get("missing_pct"))
    methods = s.get("methods") or ""
    # jpwr says whether its figure covers the whole run, whatever its source
    # (complete=, covered_pct=: a partial estimate is as partial as a
    # measurement); older lines say it in their source alone. The share
    # covered is unknown (None) where jpwr could not count what is missing.
    if "complete" in s:
        incomplete, covered = s["complete"] != "yes", _num(s.get("covered_pct"))
    else:
        incomplete = s.get("source") == "incomplete"
        covered = None if missing is None else 100.0 - missing
    out = _window("run", wh, int(devices) if devices else None, _num(s.get("duration_s")),
                  facts.work_total, not incomplete, _num(s.get("mean_w_per_device")) if counted else None)
    window = "run"
    if timed is not None:
        # jpwr gives a window with a gap no total; a counter or whole samples
        # make a timed window whole even where the run as a whole is not
        out.update(_window("timed", _num(timed.get("total_wh")), int(_num(timed.get("devices")) or 0)
                           or None, _num(timed.get("duration_s")), facts.work_timed,
                           "incomplete" not in (timed.get("basis") or "")))
        window = "timed" if out["energy_complete_timed"] else "run"
    by_scope = {k: _num(v) for k, v in kv(_last(jpwr_text, "jpwr-scopes:")).items()}
    out.update(energy_scope=scope, energy_estimated=s.get("source") == "estimated"
               or "estimate" in re.split(r"[+/_]", methods),
               energy_incomplete=incomplete, energy_methods=methods or None,
               energy_basis=s.get("basis") or None, energy_devices=int(devices) if devices else None,
               energy_missing_pct=missing,
               energy_covered_pct=100.0 if out["energy_complete_run"] else covered,
               work_per_wh_gpu=gpu_work_per_wh(scope, out["work_per_wh_run"], out["wh_run"],
                                               by_scope.get("gpu")),
               energy_by_scope=by_scope,
               energy_by_node={k: _num(v) for k, v in kv(_last(jpwr_text, "jpwr-hosts:")).items()},
               counter_vs_integrated_pct=_num(s.get("counter_vs_integrated_pct")),
               **accelerator_share(by_scope))
    return headline(out, window)


# The scopes of jpwr's that count the accelerators alone, the first found
# taken: the node meter's own accelerator channels (pm_counters accelN,
# read by the same meter as the node figure), else the GPUs' sensors
ACCELERATOR_SCOPES = ("accelerator", "gpu")


def accelerator_share(by_scope: dict[str, float | None]) -> dict:
    """The accelerators' share of the nodes' energy where jpwr measured a
    node scope beside them: both from its by-scope line, so over one window
    (the whole run) and one set of hosts' samples; none elsewhere."""
    node = by_scope.get("node")
    scope = next((s for s in ACCELERATOR_SCOPES if by_scope.get(s)), None)
    accelerators = by_scope.get(scope) if scope is not None else None
    if not node or accelerators is None:
        return {}
    return {"accelerator_share_of_node_pct": 100 * accelerators / node,
            "accelerator_share_basis": f"{scope}/node(run)"}


def node_energy(found: NodeEnergy, work_total: float | None, nodes: int | None) -> dict:
    """The node energy fields of a row from its job's node_energy.json
    (read once, with the evidence): the state, why there is no figure and
    the job's notes on its meter, the meter's source, scope and window, and
    the figures where it metered whole nodes."""
    node_wh, seconds = found.node_wh, found.duration_s
    whole = "" if found.state != MEASURED or node_wh is not None else \
        f"{found.source} meters scope {found.scope}, not whole nodes: the row has no node figure"
    # why there is no figure, then what the job noted of its meter (a platform.xml that says otherwise)
    reason = "; ".join(filter(None, [found.reason, whole, *found.notes]))
    mean_w = node_wh * 3600 / seconds if node_wh is not None and seconds else None
    return {"node_energy_state": found.state, "node_energy_reason": reason or None,
            "node_energy_source": found.source, "node_energy_scope": found.scope,
            "node_energy_window": found.window, "node_wh": node_wh,
            "node_window_s": seconds if node_wh is not None else None,
            "node_power_w_per_node": mean_w / nodes if mean_w is not None and nodes else None,
            # the job's work over the job's node energy: the window holds the whole run
            "work_per_node_wh": work_total / node_wh if work_total is not None and node_wh else None}


def _last(text: str, prefix: str) -> str:
    found = re.findall(rf"^{re.escape(prefix)} (.*)$", text, re.MULTILINE)
    return found[-1] if found else ""


def energy_flags(fields: dict) -> list[str]:
    """The flags of a measured row's energy, one word each: a run whose
    figure is not whole (with the share its samples cover) and scopes that
    differ between hosts."""
    out = []
    if not fields["energy_complete_run"]:
        covered = fields["energy_covered_pct"]
        share = "an-unknown-share" if covered is None else f"{covered:.0f}%"
        out.append(f"energy-incomplete(covers-{share}-of-the-run-window)")
    if "+" in (fields.get("energy_scope") or ""):
        out.append("energy-scopes-differ-between-hosts")
    return out
