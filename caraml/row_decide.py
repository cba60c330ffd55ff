"""Deciding a row: from the evidence of one work package (caraml/row_evidence.py)
and its benchmark's entry of the table (caraml/benchmarks.py) to the whole
row, once: its system and configuration, throughput, MFU with its peak,
energy, peak memory, status (caraml/row_status.py) and flags. Standard
library only (login node)."""

from __future__ import annotations

from caraml import benchmarks, device_peaks, power_limit_record
from caraml.benchmarks import Benchmark
from caraml.row_evidence import Evidence
from caraml.row_facts import (MEMORY, Facts, energy, energy_flags, last_kv, measured_peak, mfu_refusal,
                              provenance)
from caraml.row_status import MEASURED, Status, decide, slurm_state

SCHEMA = "caraml-row/1"
# Another process's share of the host's CPUs over the run above which a row
# is flagged: a competitor this large moves throughput by more than the
# run-to-run spread of a quiet host.
CONTENTION_PCT = 10.0
_num, _int = benchmarks.number, benchmarks.whole


def _system(params: dict[str, str]) -> dict:
    nodes, per_node = _int(params.get("nodes")), _int(params.get("devices_per_node"))
    return {"name": params.get("system_name") or None,
            "description": params.get("system_description") or None,
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
    config["label"] = " ".join(str(p) for p in parts if p) or "unknown configuration"
    return config


def _throughput(benchmark: Benchmark, g: dict[str, str], ev: Evidence, system: dict) -> dict | None:
    names = benchmark.figures
    rate = _num(g.get(names.per_s))
    per_dev = _num(g.get(names.per_s_per_device))
    iterations = _int(g.get("iterations"))
    if rate is None and benchmark.vendor_rate is not None:
        found = benchmark.vendor_rate.findall(ev.text("job.err", "job.out"))
        # samples (sequences of the LLM) a second of the last epoch or step
        per_sample = _num(ev.params.get(benchmark.vendor_sample_param or "")) or 1.0
        rate = _num(found[-1]) * per_sample if found else None
        per_dev = rate / system["devices"] if rate is not None and system["devices"] else None
        if benchmark.vendor_steps is not None:  # one logged line a step
            iterations = len(benchmark.vendor_steps.findall(ev.text("job.err"))) or None
    if rate is None:
        return None
    nodes = system["nodes"] or _int(g.get("nodes"))
    return {"unit": benchmark.unit, "per_s": rate, "per_s_per_device": per_dev,
            "per_s_per_node": rate / nodes if nodes else None,
            "per_s_median": _num(g.get(names.per_s_median)), "iterations": iterations,
            "time_per_iteration_s": _num(g.get("time_per_iteration_s"))}


def _mfu(g: dict[str, str]) -> dict | None:
    """MFU with the peak it divides by, that peak's basis and its source, as
    the driver's line names the peak (caraml/device_peaks.py's Peak)."""
    value = _num(g.get("mfu"))
    tflops = _num(g.get("peak_tflops"))
    if value is None or tflops is None:
        return None
    peak = device_peaks.of_line(tflops, g.get("peak_basis"), g.get("peak_key"))
    return {"value": value, "model_tflops_per_device": _num(g.get("model_tflops_per_device")),
            "hardware_tflops_per_device": _num(g.get("tflops_per_device")),
            "peak_tflops": tflops, "peak_basis": peak.basis, "peak_source": peak.source,
            "measured_peak": measured_peak(g)}


def flags(ev: Evidence, status: Status, energy_row: dict | None, limit: dict | None) -> list[str]:
    """Doubt in a measured row, one word each; for a row that is not a
    measurement (its status says what went wrong) only what it left on the
    node: a power limit not put back, or one it found away from the default."""
    if status.state not in MEASURED:
        return power_limit_record.row_flags(limit, ev.text("job.out"), measured=False)
    out = energy_flags(energy_row) if energy_row is not None else []
    out += power_limit_record.row_flags(limit, ev.text("job.out"))
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
    why = mfu_refusal(g, end, CONTENTION_PCT)
    return out + ([f"mfu-not-available({why})"] if why else [])


def decide_row(name: str, ev: Evidence, *, slurm_state=slurm_state) -> dict:
    """The whole row, decided once."""
    benchmark = benchmarks.get(name)
    job_out = ev.text("job.out")
    g = last_kv(job_out, "global")
    system = _system(ev.params)
    throughput = _throughput(benchmark, g, ev, system)
    status = decide(ev, has_throughput=throughput is not None, slurm_state=slurm_state)
    limit = power_limit_record.row_part(
        ev.params.get("power_limit"), _num(ev.params.get("tdp_w")), job_out,
        ev.params.get("power_limit_scope_run"), guard=ev.text("power_guard"),
        devices_per_package=_int(ev.params.get("devices_per_package")))
    # -- power limits (caraml/power_limit_record.py): a point measured at another limit than
    # its own (a device found away from its default) is no measurement
    off_limit = power_limit_record.not_a_measurement(limit, job_out) if status.measured else None
    status = Status("failed", off_limit) if off_limit else status
    # --
    prov = provenance(job_out)
    work_total = _num(g.get(benchmark.figures.work_total))
    if work_total is None and benchmark.vendor_steps is not None and throughput is not None:
        # Graphcore's GPT-2 (GC200): every logged step trained one global batch
        steps = len(benchmark.vendor_steps.findall(ev.text("job.err")))
        work_total = steps * (_num(ev.params.get("global_batch_used")) or 0) \
            * (_num(ev.params.get(benchmark.vendor_sample_param or "")) or 0) or None
    facts = Facts(scope_asked=ev.params.get("energy_scope") or "counted",
                  work_total=work_total, work_timed=_num(g.get(benchmark.figures.work_timed)))
    energy_row = energy(ev.text("jpwr"), facts) if ev.texts.get("jpwr") else None
    if energy_row and not status.measured:
        energy_row = _unmeasured(energy_row)
    # the limit the devices ran under (a sweep's point), beside the software they ran, and
    # the limit rank 0's device had at the start of every run, with its default
    prov["power_limit_w"] = limit["reported_w"] if limit else None
    prov.update(power_limit_record.at_start(job_out))
    return {
        "schema": SCHEMA, "benchmark": benchmark.name, "work_package": ev.work_package,
        "system": system, "config": _config(benchmark, ev.params, g),
        "throughput": throughput if status.state in MEASURED else None,
        "mfu": _mfu(g) if status.state in MEASURED
        and not mfu_refusal(g, last_kv(job_out, "host at end"), CONTENTION_PCT) else None,
        "energy": energy_row,
        "power_limit": limit,
        "memory": _memory(g) if status.state in MEASURED else None,
        "status": {"state": status.state, "reason": status.reason},
        "flags": flags(ev, status, energy_row, limit),
        "provenance": prov,
    }


def _memory(g: dict[str, str]) -> dict | None:
    """Peak device memory over the timed iterations (caraml/memory.py), as
    the driver core's summary line gives it."""
    memory = {name: _num(g.get(f"memory_{name}")) for name in MEMORY}
    return memory if any(v is not None for v in memory.values()) else None


def _unmeasured(energy_row: dict) -> dict:
    """The energy of a row that is no measurement: what the run drew is kept
    (nothing measured is lost), but a timed window, which only a run that
    got past its warm-up has, and work per Wh, whose work is no figure of
    the row, mean nothing there."""
    run = {**energy_row["windows"]["run"], "work_per_wh": None}
    return {**energy_row, "windows": {"run": run}, "headline_window": "run"}
