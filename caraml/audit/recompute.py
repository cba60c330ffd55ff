"""Every figure a row states, made again from its raw evidence by the one
function that made it: throughput from the timed iterations and one
iteration's work (caraml/node/timing.py, caraml/node/throughput.py; the
work and FLOPs of an iteration by the benchmark's own formula, which its
entry names: llm_training/flops.py for the LLM), MFU from those FLOPs and
the peak (caraml/device_peaks.py), the numerics from every loss and skip,
and energy from jpwr's samples and counters (jpwr.verify counts each
rank's files again, jpwr.aggregate combines them as `jpwr combine` does,
and the row model reads its lines, caraml/row/facts.py). Where the
evidence disagrees with itself (a slowest-rank time that is no rank's, an
energy file its samples do not give, a work per iteration the formula
does not give) that is a finding of its own."""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from caraml import benchmarks, device_peaks
from caraml.audit.evidence import Evidence
from caraml.audit.findings import EVIDENCE, Finding
from caraml.benchmark_entry import Benchmark
from caraml.job.node_energy import FILE_NAME as NODE_ENERGY
from caraml.job.node_energy import read_node_energy
from caraml.node.iterations import loss as read_loss
from caraml.node.throughput import overall
from caraml.node.timing import rate, slowest_per_iteration, summarize
from caraml.row.facts import Facts, energy, node_energy
from caraml.row.record import timed_span
from caraml.row.status import RAN


@dataclass
class Recomputed:
    """The figures made again, under the row's field names, and what the
    evidence says against itself."""

    figures: dict = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    # one iteration's FLOPs per unit of work (the LLM's per token), for the work-per-Wh bound
    flops_per_work: float | None = None

    def inconsistent(self, evidence: str) -> None:
        self.findings.append(Finding(EVIDENCE, evidence))


def _formula(entry: Benchmark, iterations: Mapping) -> dict:
    """One iteration's work (and FLOPs, and the model's parameters) by the
    benchmark's formula, from the model the run recorded; without a formula
    its work is the global batch, which the recorded one is checked against."""
    if entry.work_formula is None:
        return {}
    module, _, name = entry.work_formula.partition(":")
    counted = getattr(importlib.import_module(module), name)(iterations.get("model") or {})
    return dict(counted)


def _work(ev: Evidence, out: Recomputed) -> tuple[int | None, dict]:
    """One iteration's work by the benchmark's formula (None where it cannot be counted), and what the
    formula counted."""
    row, recorded = ev.row, ev.iterations
    entry = benchmarks.get(row.benchmark)
    try:
        counted = _formula(entry, recorded)
    except (KeyError, TypeError, ValueError) as err:
        out.inconsistent(f"{entry.work_formula} cannot count the model iterations.json records ({err})")
        counted = {}
    work = counted.get("work_per_iteration", row.global_batch)
    if work is None or recorded.get("work_per_iteration") != work:
        out.inconsistent(f"iterations.json says an iteration does {recorded.get('work_per_iteration')} "
                         f"{row.unit}; {entry.work_formula or 'its global batch'} gives {work}")
    model = recorded.get("model") or {}
    for name, stated, found in (("global_batch", row.global_batch, model.get("global_batch_size")),
                                ("sequence_length", row.sequence_length, model.get("seq_length")),
                                ("params", row.params, counted.get("params"))):
        if found is not None and stated is not None and stated != found:
            out.inconsistent(f"{name}: the row states {stated}, the model iterations.json records gives "
                             f"{found}")
    return (int(work) if work else None), counted


def _throughput(ev: Evidence, work: int, out: Recomputed) -> tuple[float, int]:
    """The throughput fields; the mean time per iteration and the devices (ranks)."""
    by_rank = ev.iterations.get("timed_s_by_rank") or []
    slowest = slowest_per_iteration(by_rank) if by_rank else []
    recorded = ev.iterations.get("timed_s") or []
    if len(recorded) != len(slowest) or any(abs(a - b) > 1e-9 for a, b in zip(recorded, slowest)):
        out.inconsistent("iterations.json's timed_s is not the slowest rank's time of each iteration")
    if not slowest:
        return math.nan, len(by_rank)
    row, job, devices = ev.row, summarize(slowest), len(by_rank)
    if row.devices is not None and row.devices != devices:
        out.inconsistent(f"devices: the row states {row.devices}, iterations.json holds {devices} ranks")
    hosts = ev.provenance.get("hostnames") or []
    if hosts and row.nodes is not None and row.nodes != len(hosts):
        out.inconsistent(f"nodes: the row states {row.nodes}, the job ran on {len(hosts)} hosts "
                         f"({', '.join(hosts)})")
    figures = overall("work", work, job, devices)
    nodes = len(hosts) or row.nodes
    out.figures.update(
        per_s=figures["work_per_s_mean"], per_s_median=figures["work_per_s_median"],
        per_s_per_device=figures["work_per_s_per_device"],
        per_s_per_node=figures["work_per_s_mean"] / nodes if nodes else None,
        timed_iterations=job.iterations, time_per_iteration_s=job.mean_s, **job.spread(),
        timed_s=timed_span(job.iterations, job.mean_s, None))
    return job.mean_s, devices


def _peak(ev: Evidence, out: Recomputed) -> float | None:
    """The peak MFU divides by, from what the run recorded of it: a
    measured one the best of its windows, a datasheet one the table's."""
    peak = ev.iterations.get("peak") or {}
    windows = [float(w) for w in peak.get("windows") or []]
    if peak.get("basis") == device_peaks.MEASURED:
        found = max(windows) if windows else None
    elif peak.get("key") in device_peaks.PEAKS:
        found = device_peaks.PEAKS[peak["key"]].tflops
    else:
        found = peak.get("tflops")
    recorded = peak.get("tflops")
    if found is not None and recorded is not None and not math.isclose(found, recorded, rel_tol=1e-6):
        out.inconsistent(f"the peak iterations.json records, {recorded:g} TFLOP/s, is not its "
                         f"{peak.get('basis')} value {found:g} TFLOP/s")
    return found


def _mfu(ev: Evidence, counted: dict, mean_s: float, devices: int, out: Recomputed) -> None:
    if "model_flops_per_iteration" not in counted or not mean_s > 0 or not devices:
        return
    model = rate(counted["model_flops_per_iteration"], mean_s) / devices / 1e12
    hardware = rate(counted["hardware_flops_per_iteration"], mean_s) / devices / 1e12
    out.flops_per_work = counted["model_flops_per_iteration"] / counted["work_per_iteration"]
    out.figures.update(model_tflops_per_device=model, hardware_tflops_per_device=hardware)
    peak = _peak(ev, out)
    if peak:
        out.figures.update(peak_tflops=peak, mfu=model / peak)


def _numerics(ev: Evidence, out: Recomputed) -> None:
    losses = [read_loss(value) for value in ev.iterations.get("losses") or []]
    if not losses:
        return
    warmup = int(ev.iterations.get("warmup_iterations") or 0)
    skips = ev.iterations.get("skipped_by_rank") or [[]]
    bad = next((i for i, value in enumerate(losses, 1) if value is not None and not math.isfinite(value)),
               None)
    out.figures.update(loss_first=losses[0], loss_nonfinite_at=bad,
                       skipped_iterations=max(sum(map(bool, rank[warmup:])) for rank in skips))


def _energy(ev: Evidence, work: int, out: Recomputed) -> None:
    """The energy fields from jpwr's samples and counters, where the row states any."""
    from jpwr import aggregate, verify  # pandas: only where a row has energy to count

    row, folder = ev.row, ev.energy
    if folder is None:
        return
    for line in verify.differences([folder]):
        out.inconsistent(f"jpwr's files: {line}")
    try:
        job = aggregate.read_job([folder])
        table = aggregate.combine_job(job)
        lines = aggregate.result_lines(table, job)
    except ValueError as err:
        out.inconsistent(f"jpwr cannot combine {folder} ({err})")
        return
    counted_scope = next((part.partition("=")[2] for part in lines[0].split() if part.startswith("scope=")),
                         "")
    asked = "counted" if row.energy_scope in (None, counted_scope) else row.energy_scope
    total = int(ev.iterations.get("iterations_total") or 0)
    timed = len(ev.iterations.get("timed_s") or [])
    out.figures.update(energy("\n".join(lines), Facts(asked, work * total, work * timed)))


# the node meter's figures a row states (its words name the file where it was read)
NODE_FIGURES = ("node_energy_state", "node_wh", "node_window_s", "node_power_w_per_node", "work_per_node_wh")


def _node(ev: Evidence, work: int) -> dict:
    """The nodes' energy from the job's record of the centre's meter (node_energy.json)."""
    path = ev.work / NODE_ENERGY if ev.work is not None else None
    if path is None or not path.is_file():
        return {}
    total = work * int(ev.iterations.get("iterations_total") or 0)
    nodes = len(ev.provenance.get("hostnames") or []) or ev.row.nodes
    found = node_energy(read_node_energy(path), total, nodes)
    return {name: found[name] for name in NODE_FIGURES}


def _system(ev: Evidence) -> dict:
    """The system the job was planned for, as its platform.xml block says
    (system.json): its name and TDP, which the power bound divides by."""
    if not ev.system:
        return {}
    tdp = (ev.system.get("params") or {}).get("tdp_w")
    try:
        watts = float(tdp) if tdp not in (None, "") else None
    except ValueError:
        watts = None  # a value JUBE computes (mode python): the row's own is all there is
    return {"system_name": ev.system.get("tag"), **({"tdp_w": watts} if watts is not None else {})}


def _build(ev: Evidence) -> dict:
    """The commit the row names and whether its tree was clean, as the run's provenance.json records them."""
    commit = ev.provenance.get("commit")
    return {"commit": commit[:12], "clean": ev.provenance.get("clean")} if commit else {}


def figures(ev: Evidence) -> Recomputed:
    """The row's figures made again from its evidence (ev has it all: ev.missing is empty)."""
    out = Recomputed(figures={**_system(ev), **_build(ev)})
    if ev.row.state not in RAN:
        return out  # a row that did not run to its figures states none
    work, counted = _work(ev, out)
    if work is None:
        return out  # nothing to count: every figure it states is a finding
    mean_s, devices = _throughput(ev, work, out)
    _mfu(ev, counted, mean_s, devices, out)
    _numerics(ev, out)
    if ev.row.energy_scope is not None or ev.row.wh is not None:
        _energy(ev, work, out)
    out.figures.update(_node(ev, work))
    return out
