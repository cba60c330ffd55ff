"""The row model: one measured configuration (a JUBE work package of a
benchmark's execute step) decided once, from what its job and the combine
step left behind. Everything that shows a row reads what this module
decides: the JUBE tables (through the `CARAML row:` lines it prints), the
README's main command (caraml/login/rows.py) and caraml-compare (row.json).

    python -m caraml.row --benchmark image --jpwr-status 0 JPWR_OUT JPWR_ERR

run in the combine step's work directory, reads the execute work package
through JUBE's `execute` link and JUBE's own record of the run
(workpackages.xml), writes row.json there and prints the lines for the
tables. No value reaches this module through Python or shell source: the
paths are arguments, the facts come from files.

Standard library only (and the suite's JUBE adapter and peak table): the
login node's python3 runs it, before any environment exists."""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from caraml import device_peaks, report
from caraml.row_facts import Facts, energy, last_kv, measured_peak, mfu_refusal, provenance
from caraml.row_status import MEASURED, SIGNAL_FILE, Status, decide, slurm_state

SCHEMA = "caraml-row/1"
FILE_NAME = "row.json"
BENCHMARKS = ("llm", "image", "operator")
# Another process's share of the host's CPUs over the run above which a row
# is flagged: a competitor this large moves throughput by more than the
# run-to-run spread of a quiet host.
CONTENTION_PCT = 10.0


@dataclass
class Evidence:
    """What a work package left: the texts the model reads, by name."""

    texts: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    work_package: str = ""

    def text(self, *names: str) -> str:
        return "\n".join(self.texts.get(n, "") for n in names)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def workpackage_params(run_dir: Path) -> dict[int, dict[str, str]]:
    """Each work package's parameters from JUBE's record of the run: the
    evaluated value where JUBE evaluated one (python and shell modes)."""
    root = ET.parse(run_dir / "workpackages.xml").getroot()
    out = {}
    for wp in root.iter("workpackage"):
        out[int(wp.get("id"))] = {
            p.get("name"): (p.findtext("selection") if p.find("selection") is not None
                            else p.findtext("value") or "")
            for p in wp.iter("parameter")}
    return out


def workpackage_parent(run_dir: Path, wp_id: int) -> int | None:
    root = ET.parse(run_dir / "workpackages.xml").getroot()
    for wp in root.iter("workpackage"):
        if int(wp.get("id")) == wp_id:
            parents = (wp.findtext("parents") or "").split(",")
            return int(parents[0]) if parents[0].strip() else None
    return None


def _data_step(run_dir: Path, wp_id: int) -> dict[str, str]:
    """The LLM's data step's errors (its failure is the row's), by name."""
    parent = workpackage_parent(run_dir, wp_id)
    if parent is None:
        return {}
    return {"data.stderr": _read(data_dir / "stderr")
            for data_dir in run_dir.glob(f"{parent:06d}_*/work")}


def _wp_id(work_dir: Path) -> int:
    """The id of a work package from its folder name (000003_execute/work)."""
    return int(work_dir.resolve().parent.name.split("_", 1)[0])


def gather(execute_work: Path, jpwr_out: Path | None = None, jpwr_err: Path | None = None,
           jpwr_status: int | None = None) -> Evidence:
    """The evidence of one execute work package (and its combine step, where
    it ran)."""
    execute_work = execute_work.resolve()
    run_dir = execute_work.parents[1]
    params = workpackage_params(run_dir)
    wp_id = _wp_id(execute_work)
    texts = {name: _read(execute_work / name)
             for name in ("job.out", "job.err", "stderr", "stdout", "error", SIGNAL_FILE)}
    texts.update(_data_step(run_dir, wp_id))
    if jpwr_out is not None:
        texts["jpwr"] = _read(jpwr_out)
        texts["jpwr.err"] = _read(jpwr_err) if jpwr_err else ""
        texts["jpwr.status"] = str(jpwr_status if jpwr_status is not None else 0)
    return Evidence(texts, params[wp_id], str(execute_work))


def _num(value: object) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # nan: unknown


def _int(value: object) -> int | None:
    number = _num(value)
    return None if number is None else int(number)


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


def _config(benchmark: str, params: dict[str, str], g: dict[str, str]) -> dict:
    if benchmark == "llm":
        model = g.get("model_size") or params.get("model_size")
        config = {"model": model, "precision": g.get("precision") or params.get("precision"),
                  "global_batch": _int(g.get("global_batch_size"))
                  or _int(params.get("global_batch_used"))
                  or _int(params.get("global_batch_size")),
                  "sequence_length": _int(g.get("seq_length")) or _int(params.get("seq_length")),
                  "image_size": None,
                  "backend": g.get("backend") or params.get("backend") or None,
                  "tp": _int(g.get("tp")), "pp": _int(g.get("pp")), "dp": _int(g.get("dp")),
                  "micro_batch": _int(g.get("micro_batch_size")), "params": _num(g.get("params")),
                  "compile": None}
    elif benchmark == "operator":
        # the problem is part of the model's name: two problems are never like for like
        problem = g.get("problem") or params.get("problem")
        config = {"model": f"{g.get('model') or 'FNO'} {problem}" if problem else None,
                  "precision": g.get("precision") or params.get("precision") or None,
                  "global_batch": _int(g.get("global_batch_size"))
                  or _int(params.get("global_batch_size")),
                  "sequence_length": None, "image_size": None, "backend": "neuraloperator",
                  "tp": None, "pp": None, "dp": None,
                  "micro_batch": _int(g.get("batch_size_per_device"))
                  or _int(params.get("batch_size_per_device")), "params": None,
                  "compile": g.get("compile") or params.get("compile_mode") or None}
    else:
        config = {"model": g.get("model") or params.get("model") or None,
                  "precision": g.get("precision") or params.get("precision") or None,
                  "global_batch": _int(g.get("global_batch_size"))
                  or _int(params.get("global_batch_size")),
                  "sequence_length": None, "image_size": _int(params.get("image_size")),
                  "backend": "torchvision" if params.get("device_kind") != "ipu" else "poptorch",
                  "tp": None, "pp": None, "dp": None,
                  "micro_batch": _int(g.get("batch_size_per_device")), "params": None,
                  "compile": None}
    parts = [config["model"], config["precision"],
             config["image_size"] and f"{config['image_size']}px",
             config["compile"] and config["compile"] != "none" and f"compile {config['compile']}",
             config["global_batch"] and f"batch {config['global_batch']}"]
    config["label"] = " ".join(str(p) for p in parts if p) or "unknown configuration"
    return config


# The per-second figure and the work counts of each benchmark's global line
_WORK = {"llm": ("tokens", "tokens_per_s", "tokens_per_s_median", "tokens_per_s_per_device",
                 "tokens_total", "tokens_timed"),
         "image": ("images", "images_per_s_mean", "images_per_s_median",
                   "images_per_s_per_device", "samples_total", "samples_timed"),
         "operator": ("samples", "samples_per_s_mean", "samples_per_s_median",
                      "samples_per_s_per_device", "samples_total", "samples_timed")}
# Graphcore's train.py (GC200) prints its own line, once an epoch
_IPU_THROUGHPUT = re.compile(r"throughput: ([0-9.eE+-]+) samples/sec")


def _throughput(benchmark: str, g: dict[str, str], ev: Evidence, system: dict) -> dict | None:
    unit, per_s, median, per_device, _, _ = _WORK[benchmark]
    rate = _num(g.get(per_s))
    per_dev = _num(g.get(per_device))
    if rate is None:
        found = _IPU_THROUGHPUT.findall(ev.text("job.err", "job.out"))
        # samples (sequences of the LLM) a second of the last epoch or step
        per_sample = _num(ev.params.get("seq_length")) or 1.0 if benchmark == "llm" else 1.0
        rate = _num(found[-1]) * per_sample if found else None
        per_dev = rate / system["devices"] if rate is not None and system["devices"] else None
    if rate is None:
        return None
    nodes = system["nodes"] or _int(g.get("nodes"))
    return {"unit": unit, "per_s": rate, "per_s_per_device": per_dev,
            "per_s_per_node": rate / nodes if nodes else None,
            "per_s_median": _num(g.get(median)), "iterations": _int(g.get("iterations")),
            "time_per_iteration_s": _num(g.get("time_per_iteration_s"))}


def _mfu(g: dict[str, str], device_name: str | None, named: str | None) -> dict | None:
    """MFU with the peak it divides by and where that peak comes from: the
    device the system names (platform.xml's peak_tflops), else the device the
    driver saw, in the datasheet table; or the driver's measurement."""
    value = _num(g.get("mfu"))
    peak = _num(g.get("peak_tflops"))
    if value is None or peak is None:
        return None
    measured = g.get("peak_source") == "measured-matmul"
    known = None if measured else (device_peaks.PEAKS.get(named or "")
                                   or device_peaks.lookup(device_name or ""))
    if measured:
        source = ("the device's dense matmul rate, measured: the best of short windows "
                  "before and after training")
    elif known is not None and abs(known.tflops - peak) <= 1e-6 * peak:
        source = known.source
    else:
        source = f"--peak-tflops {peak:g} given to the driver"
    return {"value": value, "model_tflops_per_device": _num(g.get("model_tflops_per_device")),
            "hardware_tflops_per_device": _num(g.get("tflops_per_device")),
            "peak_tflops": peak, "peak_basis": "measured-matmul" if measured else "datasheet",
            "peak_source": source, "measured_peak": measured_peak(g)}


def flags(ev: Evidence, status: Status, energy_row: dict | None) -> list[str]:
    """Doubt in a measured row, one word each; none for a row that is not a
    measurement (its status says what went wrong)."""
    if status.state not in MEASURED:
        return []
    out = []
    if energy_row is not None:
        missing = energy_row["windows"]["run"]["missing_pct"]
        if energy_row.get("incomplete"):
            # jpwr gives no percentage where a file was lost or samples stopped early
            out.append(f"energy-incomplete({missing:.0f}%-of-samples-missing)" if missing is not None
                       else "energy-incomplete(samples-or-files-lost)")
        if "+" in (energy_row.get("scope") or ""):
            out.append("energy-scopes-differ-between-hosts")
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


def decide_row(benchmark: str, ev: Evidence, *, slurm_state=slurm_state) -> dict:
    """The whole row, decided once."""
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}: one of {', '.join(BENCHMARKS)}")
    job_out = ev.text("job.out")
    g = last_kv(job_out, "global")
    system = _system(ev.params)
    throughput = _throughput(benchmark, g, ev, system)
    status = decide(ev, has_throughput=throughput is not None, slurm_state=slurm_state)
    prov = provenance(job_out)
    device_name = prov.pop("device_name")  # the peak's name, not the row's provenance
    *_, total_key, timed_key = _WORK[benchmark]
    work_total = _num(g.get(total_key))
    if work_total is None and benchmark == "llm" and throughput is not None:
        # Graphcore's GPT-2 (GC200): every logged step trained one global batch
        steps = len(re.findall(r"^step \d+ of epoch", ev.text("job.err"), re.MULTILINE))
        work_total = steps * (_num(ev.params.get("global_batch_used")) or 0) \
            * (_num(ev.params.get("seq_length")) or 0) or None
    facts = Facts(scope_asked=ev.params.get("energy_scope") or "counted",
                  work_total=work_total, work_timed=_num(g.get(timed_key)))
    energy_row = energy(ev.text("jpwr"), facts) if ev.texts.get("jpwr") else None
    if energy_row and not status.measured:
        energy_row = _unmeasured(energy_row)
    return {
        "schema": SCHEMA, "benchmark": benchmark, "work_package": ev.work_package,
        "system": system, "config": _config(benchmark, ev.params, g),
        "throughput": throughput if status.state in MEASURED else None,
        "mfu": _mfu(g, device_name, ev.params.get("peak_tflops")) if status.state in MEASURED
        and not mfu_refusal(g, last_kv(job_out, "host at end"), CONTENTION_PCT) else None,
        "energy": energy_row,
        "status": {"state": status.state, "reason": status.reason},
        "flags": flags(ev, status, energy_row),
        "provenance": prov,
    }


def _unmeasured(energy_row: dict) -> dict:
    """The energy of a row that is no measurement: what the run drew is kept
    (nothing measured is lost), but a timed window, which only a run that
    got past its warm-up has, and work per Wh, whose work is no figure of
    the row, mean nothing there."""
    run = {**energy_row["windows"]["run"], "work_per_wh": None}
    return {**energy_row, "windows": {"run": run}, "headline_window": "run"}


def _source(energy: dict) -> str:
    """How the energy was had, in one word: incomplete, estimated or measured."""
    return ("incomplete" if energy.get("incomplete") else
            "estimated" if energy.get("estimated") else "measured")


def _pairs(values: dict | None) -> str | None:
    """A mapping as one word: name=value;name=value."""
    return ";".join(f"{k}={v:.6g}" for k, v in values.items() if v is not None) if values else None


# The single-word fields of the `CARAML row:` line, by the name the tables' patterns use
def table_fields(row: dict) -> dict[str, object]:
    e = row["energy"] or {}
    window = (e.get("windows") or {}).get(e.get("headline_window")) or {}
    run = (e.get("windows") or {}).get("run") or {}
    timed = (e.get("windows") or {}).get("timed") or {}
    t = row["throughput"] or {}
    m = row["mfu"] or {}
    system, config = row["system"], row["config"]
    scope = e.get("scope")
    if scope and e.get("headline_window") != "timed":
        scope += "(run)"
    values = {
        "state": row["status"]["state"],
        "notable": "yes" if row["status"]["state"] != "ok" or row["flags"] else "no",
        "layout": f"{system['nodes'] or '?'}x{system['devices_per_node'] or '?'}",
        "model": config["model"], "precision": config["precision"],
        "global_batch": config["global_batch"],
        "per_s": t.get("per_s"), "per_s_per_device": t.get("per_s_per_device"),
        "mfu": m.get("value"), "peak_tflops": m.get("peak_tflops"),
        "peak_basis": m.get("peak_basis"),
        "power_w_per_device": window.get("mean_power_w_per_device"),
        "work_per_wh": window.get("work_per_wh"), "wh": window.get("wh"),
        "energy_scope": scope,
        "energy_kind": None if not e else "estimated" if e.get("estimated") else "measured",
        "energy_window": e.get("headline_window"),
        "wh_run": run.get("wh"), "work_per_wh_run": run.get("work_per_wh"),
        "wh_per_device_run": run.get("wh_per_device"),
        "wh_timed": timed.get("wh"), "work_per_wh_timed": timed.get("work_per_wh"),
        "energy_source": f"{_source(e)}({e.get('methods') or '-'})" if e else None,
        "energy_devices": f"{e.get('devices')}x{e.get('scope')}" if e.get("devices") else None,
        "energy_methods": e.get("methods"), "energy_basis": e.get("basis"),
        "energy_by_scope": _pairs(e.get("by_scope")), "energy_by_node": _pairs(e.get("by_node")),
        "commit": row["provenance"].get("suite_version"), "torch": row["provenance"].get("torch"),
        "date": row["provenance"].get("date"),
    }
    values["mfu"] = None if values["mfu"] is None else round(values["mfu"], 3)
    power = values.pop("power_w_per_device")
    # watts to one decimal in every row, so a column of them lines up
    fields = {k: _short(v) if isinstance(v, float) else report.word(v) for k, v in values.items()}
    fields["power_w_per_device"] = "-" if power is None else f"{power:.1f}"
    return fields


def _short(value: float) -> str:
    """A table's figure: whole numbers from 1000 up, else five digits."""
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.5g}"


def print_lines(row: dict, file=None) -> None:
    """The lines the JUBE tables read: single words in `CARAML row:`, the
    free texts each on a line of its own (JUBE's patterns take the rest of
    the line; commas become semicolons); an ok row's reason is empty."""
    file = file or sys.stdout
    # an unknown value is left out of the line: its cell stays empty
    report.write_line(report.line("row", {k: v for k, v in table_fields(row).items()
                                          if v not in (None, "-")}), file)
    report.write_line("CARAML row reason: " + report.one_line(row["status"]["reason"]), file)
    report.write_line("CARAML row flags: " + (" ".join(row["flags"]) or "none"), file)


def undecided(benchmark: str | None, work_package: Path, error: Exception) -> dict:
    """The row of a work package whose files the model cannot read (a
    broken JUBE record, a file it cannot parse): failed, with the cause, so
    no table waits for a decision that never comes."""
    return {"schema": SCHEMA, "benchmark": benchmark, "work_package": str(work_package),
            "system": {k: None for k in ("name", "description", "device_kind", "device_unit",
                                         "tdp_w", "nodes", "devices_per_node", "devices")},
            "config": {**{k: None for k in ("model", "precision", "global_batch",
                                            "sequence_length", "image_size", "backend", "tp",
                                            "pp", "dp", "micro_batch", "params", "compile")},
                       "label": f"work package {work_package.parent.name}"},
            "throughput": None, "mfu": None, "energy": None,
            "status": {"state": "failed", "reason": f"the row model could not decide this row "
                                                    f"({type(error).__name__}: {error})"},
            "flags": [], "provenance": {}}


def decide_now(work: Path) -> dict:
    """The row of an execute work package as the model decides it from what
    the work package holds now (its combine step has not run: no energy)."""
    return _decide_or_fail("image", work)


def _decide_or_fail(benchmark: str, work: Path, **kwargs) -> dict:
    try:
        ev = gather(work, **{k: v for k, v in kwargs.items() if k != "slurm_state"})
        extra = {"slurm_state": kwargs["slurm_state"]} if kwargs.get("slurm_state") else {}
        return decide_row(ev.params.get("row_benchmark") or benchmark, ev, **extra)
    except (OSError, ValueError, KeyError, ET.ParseError) as error:
        return undecided(benchmark, work.resolve(), error)


def read(path: Path) -> dict:
    """A row.json checked against this model's schema; ValueError says what is wrong."""
    try:
        row = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"{path}: cannot read it ({err.strerror})") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    if not isinstance(row, dict) or row.get("schema") != SCHEMA:
        found = row.get("schema") if isinstance(row, dict) else type(row).__name__
        raise ValueError(f"{path}: schema {found!r}, not {SCHEMA!r}; run `jube result -a` "
                         "with this suite's version")
    return row


def rows_of_run(run_dir: Path, *, slurm_state=None) -> list[dict]:
    """Every row of a JUBE run directory: each one the combine step decided
    (row.json; one it cannot read is a failed row that names the file) and,
    for each execute work package whose combine step has not run, the one
    the model decides now from what that work package holds."""
    rows, decided = [], set()
    for path in sorted(run_dir.glob(f"*/work/{FILE_NAME}")):
        try:
            row = read(path)
        except ValueError as error:
            # the combine step's work folder links its execute work package
            link = path.parent / "execute"
            row = undecided(None, (link if link.is_dir() else path.parent).resolve(), error)
            row["status"]["reason"] = str(error)
        rows.append(row)
        decided.add(row["work_package"])
    for work in sorted(run_dir.glob("*_execute/work")):
        if str(work.resolve()) not in decided:
            rows.append(_decide_or_fail("image", work, slurm_state=slurm_state))
    return rows + _not_started(run_dir)


def _not_started(run_dir: Path) -> list[dict]:
    """A row for each execute work package JUBE planned and never began (a
    `jube run` stopped by Ctrl-C before it): JUBE makes a work package's
    folder only when it starts it."""
    try:
        root = ET.parse(run_dir / "workpackages.xml").getroot()
    except (OSError, ET.ParseError):
        return []
    params = workpackage_params(run_dir)
    rows = []
    for wp in root.iter("workpackage"):
        wp_id = int(wp.get("id"))
        work = run_dir / f"{wp_id:06d}_execute" / "work"
        if wp.findtext("step") != "execute" or work.parent.exists():
            continue
        texts = _data_step(run_dir, wp_id)
        ev = Evidence(texts, params[wp_id], str(work))
        row = decide_row(params[wp_id].get("row_benchmark") or "image", ev, slurm_state=None)
        if row["status"]["state"] == "queued":
            row["status"]["reason"] = ("not started: the run stopped before this work package; "
                                       "jube continue starts it")
        rows.append(row)
    return rows


def write(row: dict, folder: Path) -> Path:
    path = folder / FILE_NAME
    path.write_text(json.dumps(row, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caraml.row", description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", required=True, choices=BENCHMARKS)
    parser.add_argument("--execute", type=Path, default=Path("execute"),
                        help="the execute step's work folder (default: JUBE's link to it)")
    parser.add_argument("--jpwr-status", type=int, default=0,
                        help="the exit status of jpwr combine")
    parser.add_argument("jpwr_out", type=Path, help="what jpwr combine printed")
    parser.add_argument("jpwr_err", type=Path, help="jpwr combine's errors")
    args = parser.parse_args(argv)
    if not (args.execute / "job.sh").exists() and not (args.execute / "stderr").exists():
        report.error(f"{args.execute} is no execute work package: run this in the combine step")
        return 2
    row = _decide_or_fail(args.benchmark, args.execute, jpwr_out=args.jpwr_out,
                          jpwr_err=args.jpwr_err, jpwr_status=args.jpwr_status)
    if row["status"]["reason"].startswith("the row model could not decide"):
        report.error(row["status"]["reason"])
    write(row, Path.cwd())
    print_lines(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
