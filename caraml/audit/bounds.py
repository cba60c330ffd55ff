"""Plausibility bounds: figures no device can reach, whatever a row's files
say, refused like a run too short to measure, each message naming its
bound. They hold for every row, with its raw evidence or without:

- MFU at most 1 against the peak of the row's device: the datasheet's
  dense peak of the device its provenance names (caraml/device_peaks.py,
  the 16-bit tensor peak, the highest of any precision the suite runs, so
  an fp32 row is held to a bound looser than its own), else the peak the
  row divides by where it claims an MFU;
- mean power per device at most its TDP, or the limit the run set, by
  POWER_MARGIN: a device at its limit draws it, not more;
- work per Wh at most what the peak allows at that power: the peak's FLOPs
  a second over the power drawn, in the benchmark's work (where it counts
  FLOPs: the LLM);
- with raw evidence, times in order: the job's start before the energy
  measurement's, that before the timed window, the window before its end,
  its end before the job's; and each rank's timed iterations, added up,
  inside its timed energy window."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from pathlib import Path

from caraml import device_peaks
from caraml.audit.evidence import Evidence
from caraml.audit.findings import (
    MFU_BOUND,
    POWER_BOUND,
    TIMES_IN_ORDER,
    WINDOW_INSIDE_JOB,
    WORK_PER_WH_BOUND,
    Finding,
)
from caraml.row.record import Row

POWER_MARGIN = 0.10
# the scopes whose energy devices are the devices a TDP is given for
DEVICE_SCOPES = ("gpu", "ipu", "module", "accelerator")
# the job script's lines have whole seconds; the hosts' clocks of a job
# agree to about a second (NTP); a window's edge is read after its iteration's
SLACK_S = 2.0
_JOB_LINE = re.compile(r"^CARAML job: (start|end)=(\S+)", re.MULTILINE)


def peak_of(row: Row, ev: Evidence | None) -> tuple[float | None, str]:
    """The peak a row's MFU is bounded by, and its words: the datasheet's
    of the device its provenance names, else the peak the row divides by
    where it claims an MFU. A measured matmul rate the driver refused
    (below the model's own rate on a host other work kept busy: the row
    has no MFU, its flag says why) bounds nothing."""
    names = (ev.provenance.get("device_names") or []) if ev is not None else []
    if ev is not None and ev.provenance.get("device_type") == "cuda":
        for name in names:
            found = device_peaks.lookup(name)
            if found is not None:
                return found.tflops, f"the {found.model} datasheet's {found.tflops:g} TFLOP/s"
    if row.peak_tflops and row.mfu is not None:
        return row.peak_tflops, f"its {row.peak_basis or 'stated'} peak {row.peak_tflops:g} TFLOP/s"
    return None, ""


def mfu(row: Row, figures: dict, peak: tuple[float | None, str]) -> list[Finding]:
    """An MFU above 1 the row states, and a model rate (stated, made again)
    above the peak of its device (peak_of the row as stated: its value and words)."""
    out = [Finding(MFU_BOUND, f"MFU {row.mfu:.3g} stated, above 1")] if row.mfu is not None and row.mfu > 1 \
        else []
    tflops, words = peak
    for origin, model in (("stated", row.model_tflops_per_device),
                          ("recomputed", figures.get("model_tflops_per_device"))):
        if tflops and model is not None and model / tflops > 1:
            out.append(Finding(MFU_BOUND, f"MFU {model / tflops:.3g} ({origin}: {model:.4g} TFLOP/s per "
                                          f"device) exceeds 1 against {words} ({row.precision})"))
    return out


def _limit(row: Row) -> tuple[float | None, str]:
    if row.power_limit_w:
        return row.power_limit_w, f"the limit the run set, {row.power_limit_w:g} W"
    if row.tdp_w:
        return row.tdp_w, f"its TDP {row.tdp_w:g} W"
    return None, ""


def power(row: Row) -> list[Finding]:
    limit, words = _limit(row)
    if limit is None or row.energy_scope not in DEVICE_SCOPES:
        return []
    out = []
    for window in ("", "_run", "_timed"):
        watts = getattr(row, f"power_w_per_device{window}")
        if watts is not None and watts > limit * (1 + POWER_MARGIN):
            out.append(Finding(POWER_BOUND, f"power_w_per_device{window} {watts:.4g} W exceeds {words} by "
                                            f"more than {POWER_MARGIN * 100:g} %"))
    return out


def work_per_wh(row: Row, flops_per_work: float | None, peak: tuple[float | None, str]) -> list[Finding]:
    """Work per Wh against what the peak's FLOPs give at the power drawn:
    devices x peak FLOP/s over the energy devices' watts, in work."""
    tflops, words = peak
    if flops_per_work is None and row.model_tflops_per_device and row.per_s_per_device:
        flops_per_work = row.model_tflops_per_device * 1e12 / row.per_s_per_device
    per_wh, watts, devices, energy_devices = row.work_per_wh, row.power_w_per_device, row.devices, \
        row.energy_devices
    if not (tflops and flops_per_work and per_wh and watts and devices and energy_devices):
        return []
    most = devices * tflops * 1e12 / flops_per_work * 3600 / (watts * energy_devices)
    if per_wh > most * (1 + 1e-9):
        return [Finding(WORK_PER_WH_BOUND, f"work_per_wh {per_wh:.4g} {row.unit}/Wh exceeds the "
                                           f"{most:.4g} that {words} allows at {watts:.4g} W per device")]
    return []


def _epoch(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except ValueError:
        return None


def times(ev: Evidence, energy: Path) -> list[Finding]:
    """The job's, the energy measurement's and the timed window's times in
    order, and each rank's timed iterations inside its window (energy: the
    run's energy folder)."""
    import pandas as pd

    from jpwr.aggregate import read_job

    job = {kind: _epoch(when) for kind, when in _JOB_LINE.findall(ev.job_out)}
    start, end = job.get("start"), job.get("end")
    out = []
    if start is not None and end is not None and end < start:
        out.append(Finding(TIMES_IN_ORDER, "job.out: the job ends before it starts"))
    by_rank = ev.iterations.get("timed_s_by_rank") or []
    measured = read_job([energy])
    for run, meta in zip(measured.runs, measured.metas):
        began, ended = _epoch(meta.get("start_time")), _epoch(meta.get("end_time"))
        name = run.path("meta", "json").name
        if began is not None and ended is not None and ended < began:
            out.append(Finding(TIMES_IN_ORDER, f"{name}: the energy measurement ends before it starts"))
        if start is not None and began is not None and began < start - SLACK_S:
            out.append(Finding(WINDOW_INSIDE_JOB, f"{name}: the energy measurement starts "
                                                  f"{start - began:.1f} s before the job"))
        if end is not None and ended is not None and ended > end + SLACK_S:
            out.append(Finding(WINDOW_INSIDE_JOB, f"{name}: the energy measurement ends "
                                                  f"{ended - end:.1f} s after the job"))
        windows = run.path("windows", "csv")
        if not windows.is_file():
            continue
        timed = pd.read_csv(windows)
        timed = timed[timed["window"] == "timed"]
        if timed.empty:
            continue
        t0, t1 = float(timed["t_start"].min()), float(timed["t_end"].max())
        if t1 < t0 or (began is not None and t0 < began) or (ended is not None and t1 > ended):
            out.append(Finding(TIMES_IN_ORDER, f"{windows.name}: the timed window ({t0:.3f} to {t1:.3f}) is "
                                               f"not inside its energy measurement"))
        rank = meta.get("rank")
        if isinstance(rank, int) and rank < len(by_rank):
            iterations = sum(by_rank[rank])
            if iterations > (t1 - t0) * 1.001 + 1e-3:
                out.append(Finding(TIMES_IN_ORDER, f"rank {rank}'s timed iterations take {iterations:.4g} s "
                                                   f"together, more than its timed window's {t1 - t0:.4g} s"))
    return out


def check(row: Row, figures: dict, flops_per_work: float | None, ev: Evidence | None) -> list[Finding]:
    """Every bound the row breaks, with its stated figures and, where it
    has raw evidence, the figures made again (MFU: both; power and work
    per Wh: the figures made again where there are, with the TDP of the
    system's block, so that a TDP or a figure left out of row.json escapes
    no bound)."""
    remade = dataclasses.replace(row, **figures)
    # the peak as the row states it: a measured one its driver refused (no MFU) stays no bound
    peak = peak_of(row, ev)
    found = mfu(row, figures, peak) + power(remade) + work_per_wh(remade, flops_per_work, peak)
    return found + (times(ev, ev.energy) if ev is not None and ev.energy is not None else [])
