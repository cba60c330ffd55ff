"""Deciding a row: from the evidence of one work package (caraml/row/evidence.py)
and its benchmark's entry of the table (caraml/benchmarks.py) to the whole
record (caraml/row/record.py), once: its system and configuration,
throughput, MFU with its peak, energy, the nodes' energy, peak memory, the
values of its benchmark's own columns, status (caraml/row/status.py), flags
and the one verdict (caraml/row/verdict.py). Standard library only (login node)."""

from __future__ import annotations

from caraml import benchmarks, device_peaks
from caraml.benchmark_entry import Benchmark, number, whole
from caraml.job.log import requeued
from caraml.report import CONTENTION_PCT, MEMORY, last_kv
from caraml.row import power_limit
from caraml.row.evidence import Evidence
from caraml.row.facts import (
    Facts,
    energy,
    energy_flags,
    headline,
    measured_peak,
    mfu_refusal,
    node_energy,
    provenance,
)
from caraml.row.record import Row, make, timed_span
from caraml.row.status import RAN, SlurmState, Status, decide_status, slurm_state
from caraml.row.verdict import judged

_num, _int = number, whole


def _system(params: dict[str, str]) -> dict:
    nodes, per_node = _int(params.get("nodes")), _int(params.get("devices_per_node"))
    return {"system_name": params.get("system_name") or None,
            "system_description": params.get("system_description") or None,
            "device_kind": params.get("device_kind") or None,
            "device_unit": params.get("device_unit") or None,
            "tdp_w": _num(params.get("tdp_w")),
            "nodes": nodes, "devices_per_node": per_node,
            "devices": _int(params.get("total_devices"))
            or (nodes * per_node if nodes and per_node else None)}


def _config(benchmark: Benchmark, params: dict[str, str], g: dict[str, str]) -> dict:
    config = benchmark.config(g, params)
    parts = [config["model"], config["precision"],
             config["image_size"] and f"{config['image_size']}px",
             config["compile"] and config["compile"] != "none" and f"compile {config['compile']}",
             config["global_batch"] and f"batch {config['global_batch']}"]
    return {**config, "label": " ".join(str(p) for p in parts if p) or "unknown configuration"}


def _throughput(benchmark: Benchmark, g: dict[str, str], ev: Evidence, system: dict) -> dict:
    names = benchmark.figures
    rate = _num(g.get(names.per_s))
    per_dev = _num(g.get(names.per_s_per_device))
    iterations = _int(g.get("iterations"))
    if rate is None and benchmark.vendor_rate is not None:
        found = benchmark.vendor_rate.findall(ev.text("job.err", "job.out"))
        # samples (sequences of the LLM) a second of the last epoch or step
        per_sample = _num(ev.params.get(benchmark.vendor_sample_param or "")) or 1.0
        logged = _num(found[-1]) if found else None
        rate = logged * per_sample if logged is not None else None
        per_dev = rate / system["devices"] if rate is not None and system["devices"] else None
        if benchmark.vendor_steps is not None:  # one logged line a step
            iterations = len(benchmark.vendor_steps.findall(ev.text("job.err"))) or None
    if rate is None:
        return {}
    nodes = system["nodes"] or _int(g.get("nodes"))
    return {"per_s": rate, "per_s_per_device": per_dev, "per_s_per_node": rate / nodes if nodes else None,
            "per_s_median": _num(g.get(names.per_s_median)), "timed_iterations": iterations,
            "time_per_iteration_s": _num(g.get("time_per_iteration_s")),
            **{f"time_per_iteration_{p}_s": _num(g.get(f"time_per_iteration_{p}_s"))
               for p in ("p10", "p50", "p90")}}


def _mfu(g: dict[str, str], refused: bool) -> dict:
    """MFU with the peak it divides by, that peak's basis and its source, as
    the driver's line names the peak (caraml/device_peaks.py's Peak); no MFU
    where it is refused (the flag says why), while the rates stand: the
    TFLOP/s the run reached do not depend on the peak it is divided by."""
    value = None if refused else _num(g.get("mfu"))
    tflops = _num(g.get("peak_tflops"))
    if tflops is None:
        return {}
    peak = device_peaks.of_line(tflops, g.get("peak_basis"), g.get("peak_key"))
    return {"mfu": value, "model_tflops_per_device": _num(g.get("model_tflops_per_device")),
            "hardware_tflops_per_device": _num(g.get("tflops_per_device")),
            "peak_tflops": tflops, "peak_basis": peak.basis, "peak_source": peak.source,
            **measured_peak(g)}


def _data_said(benchmark: Benchmark, ev: Evidence) -> dict[str, str]:
    """What the benchmark's data step said (its `CARAML data:` line)."""
    return benchmark.data_step.describe(ev.text("data.stdout")) if benchmark.data_step else {}


def _numerics(benchmark: Benchmark, ev: Evidence, g: dict[str, str]) -> dict:
    """The run's losses and skipped updates as the driver's summary line
    gives them, with the band its benchmark declares; none where the line
    has no loss (a vendor's trainer)."""
    if "loss_first" not in g:
        return {}
    band = benchmark.loss_band.facts(g, ev.params, _data_said(benchmark, ev)) \
        if benchmark.loss_band else {}
    return {"loss_first": _num(g.get("loss_first")), "loss_last": _num(g.get("loss")),
            "loss_nonfinite": g.get("loss_nonfinite"), "loss_nonfinite_at": _int(g.get("loss_nonfinite_at")),
            "skipped_iterations": _int(g.get("skipped_iterations")), **band}


def _details(benchmark: Benchmark, ev: Evidence, g: dict[str, str]) -> dict[str, str]:
    """The values of the benchmark's own columns that no field of the row
    holds, by the column's field: from the driver's line, the work
    package's parameters or what the data step said."""
    where = {"global": g, "param": ev.params, "data": _data_said(benchmark, ev)}
    out = {}
    for column in benchmark.table_columns:
        if column.source:
            kind, _, key = column.source.partition(".")
            value = where[kind].get(key)
            if value not in (None, "", "-"):
                out[column.field] = value
    return out


def flags(ev: Evidence, status: Status, energy_fields: dict, limit: dict) -> list[str]:
    """Doubt in a row whose job ran to its figures, one word each; for
    another (its status says what went wrong) only what it found or left on
    the node: a power limit away from the default, or not put back."""
    times = requeued(ev.text("job.out"))
    again = [f"requeued({times})"] if times else []
    if status.state not in RAN:
        return again + power_limit.flags(limit, measured=False)
    out = again + (energy_flags(energy_fields) if energy_fields else [])
    out += power_limit.flags(limit, measured=True)
    start = last_kv(ev.text("job.out"), "provenance")
    end = last_kv(ev.text("job.out"), "host at end")
    for when, line in (("running", start), ("at-end", end)):
        others = _int(line.get("other_benchmarks"))
        if others:
            out.append(f"other-benchmarks-{when}({others})")
    foreign = _num(end.get("foreign_cpu_pct"))
    if foreign is not None and foreign >= CONTENTION_PCT:
        out.append(f"cpu-contention({foreign:.0f}%-of-host-CPU-used-by-other-processes)")
    g = last_kv(ev.text("job.out"), "global")
    done, planned = _int(g.get("iterations_total")), _int(ev.params.get("planned_iterations"))
    if done is not None and planned and done < planned:
        out.append(f"stopped-early({done}-of-{planned}-iterations)")
    why = mfu_refusal(g, end)
    return out + ([f"mfu-not-available({why})"] if why else [])


def decide_row(name: str | None, ev: Evidence, *, slurm_state: SlurmState | None = slurm_state) -> Row:
    """The whole row, decided once."""
    benchmark = benchmarks.get(name)
    job_out = ev.text("job.out")
    g = last_kv(job_out, "global")
    system = _system(ev.params)
    throughput = _throughput(benchmark, g, ev, system)
    status = decide_status(ev, has_throughput=bool(throughput), slurm_state=slurm_state)
    ran = status.state in RAN
    work_total = _num(g.get(benchmark.figures.work_total))
    if work_total is None and benchmark.vendor_steps is not None and throughput:
        # Graphcore's GPT-2 (GC200): every logged step trained one global batch
        steps = len(benchmark.vendor_steps.findall(ev.text("job.err")))
        work_total = steps * (_num(ev.params.get("global_batch_used")) or 0) \
            * (_num(ev.params.get(benchmark.vendor_sample_param or "")) or 0) or None
    facts = Facts(scope_asked=ev.params.get("energy_scope") or "counted",
                  work_total=work_total, work_timed=_num(g.get(benchmark.figures.work_timed)))
    energy_fields = energy(ev.text("jpwr"), facts) if ev.texts.get("jpwr") else {}
    if energy_fields and not ran:
        energy_fields = _not_run(energy_fields)
    # the node meter's figure is the job's; work per node-Wh only where the job ran to its work
    node = node_energy(ev.node_energy, work_total if ran else None, system["nodes"]) \
        if ev.node_energy is not None else {}
    limit = power_limit.fields(ev.params.get("power_limit"), system["tdp_w"], job_out,
                               ev.params.get("power_limit_scope_run"), guard=ev.text("power_guard"),
                               devices_per_package=_int(ev.params.get("devices_per_package")))
    figures = {**throughput, **_mfu(g, refused=bool(mfu_refusal(g, last_kv(job_out, "host at end")))),
               **{f"memory_{name}": _num(g.get(f"memory_{name}")) for name in MEMORY},
               **_numerics(benchmark, ev, g)} if ran else {}
    if ran:
        figures["timed_s"] = timed_span(figures.get("timed_iterations"),
                                        figures.get("time_per_iteration_s"),
                                        energy_fields.get("window_s_timed"))
    return judged(make({
        "benchmark": benchmark.name, "work_package": ev.work_package, **system,
        **_config(benchmark, ev.params, g), "details": _details(benchmark, ev, g),
        "unit": benchmark.unit, **figures, **energy_fields, **node, **limit,
        "state": status.state, "reason": status.reason,
        "flags": flags(ev, status, energy_fields, limit), "requeued": requeued(job_out),
        "dry_run": ev.params.get("dry_run") == "yes", "repeat": _int(ev.params.get("repeat")),
        **provenance(job_out)}))


def _not_run(fields: dict) -> dict:
    """The energy of a row whose job did not run to its figures: what the
    run drew is kept (nothing measured is lost), but a timed window, which
    only a run that got past its warm-up has, and work per Wh, whose work is
    no figure of the row, mean nothing there."""
    kept = {name: value for name, value in fields.items() if not name.endswith("_timed")}
    return headline({**kept, "work_per_wh_run": None, "work_per_wh_gpu": None}, "run")
