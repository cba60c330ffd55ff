"""The full table of a run (every column) as a CSV file: every row of the
run (caraml/row/run.py) shown through its words (caraml/row/render.py),
the same words the JUBE row line holds, into RUN/<id>/result/result_csv.dat.
The columns: HEAD, the benchmark's own set (its entry's columns in
caraml/benchmarks.py; default_columns where it has none) and TAIL. JUBE
2.5.1 prints every table it writes, and this one's lines are several
hundred characters long, so `jube result` shows the short tables and the
row model writes this one: the combine step when it decides a row, and
caraml/row/row_out.py wherever a row's state changes before.

    python -m caraml.row.full_table RUN          (the last run of a JUBE outpath, or one run's folder)

writes the file anew and prints it. Standard library only (login and
compute nodes; the csv module, as pandas is not there)."""

from __future__ import annotations

import csv
import io
import os
import socket
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import SupportsFloat

from caraml import benchmarks, jube_run, report
from caraml.benchmark_entry import Column
from caraml.row import render
from caraml.row.record import Row
from caraml.row.run import rows_of_run

FILE = Path("result") / "result_csv.dat"
# The columns every benchmark's table starts and ends with. A title means
# the same in every table of every benchmark: Tokens/Wh, Images/Wh and
# Samples/Wh (and TimedEnergy(Wh)) the timed iterations alone, as in the
# short table; Energy(Wh) and RunTokens/Wh... the whole measured loop,
# warm-up included; EnergyScope and EnergyWindow say what the short table's
# W/dev counts, WindowEnergy(Wh) the energy in that window. The Node...
# columns are the centre's node meter as Slurm read it, over the job
# (NodeEnergyWindow job: the job script's run, start-up included), summed
# over the job's nodes; Work/NodeWh the run's work (in the row's unit) over
# it. AcceleratorShareOfNode(%) is jpwr's: its accelerators' Wh over its
# node scope's, both over the run (AcceleratorShareBasis names the two).
HEAD = (Column("System", "system_name"), Column("Precision", "precision"), Column("Nodes", "nodes"),
        Column("Devices", "devices"), Column("NodesxDevices", "layout"), Column("DeviceUnit", "device_unit"),
        Column("TDP/device(W)", "tdp_w"), Column("PowerLimit", "power_limit"),
        Column("PowerLimit/device(W)", "power_limit_w"), Column("PowerLimitScope", "power_limit_scope"),
        Column("GlobalBatchSize", "global_batch"), Column("Repeat", "repeat"))
TAIL = (Column("Time/iteration-p10(s)", "time_per_iteration_p10_s", format=".4g"),
        Column("Time/iteration-p50(s)", "time_per_iteration_p50_s", format=".4g"),
        Column("Time/iteration-p90(s)", "time_per_iteration_p90_s", format=".4g"),
        Column("FirstLoss", "loss_first", format=".4g"), Column("LastLoss", "loss_last", format=".4g"),
        Column("SkippedIterations", "skipped_iterations"),
        Column("EnergyScope", "energy_scope_shown"), Column("EnergyWindow", "energy_window"),
        Column("WindowEnergy(Wh)", "wh"), Column("Energy(Wh)", "wh_run"),
        Column("Energy/device(Wh)", "wh_per_device_run"), Column("TimedEnergy(Wh)", "wh_timed"),
        Column("EnergyDevices", "energy_devices_shown"), Column("MeanPower/device(W)", "power_w_per_device"),
        Column("EnergySource", "energy_source"), Column("EnergyMethods", "energy_methods"),
        Column("EnergyBasis", "energy_basis"), Column("EnergyByScope(Wh)", "energy_by_scope"),
        Column("EnergyByNode(Wh)", "energy_by_node"),
        Column("AcceleratorShareOfNode(%)", "accelerator_share_of_node_pct"),
        Column("AcceleratorShareBasis", "accelerator_share_basis"),
        Column("NodeEnergy(Wh)", "node_wh"), Column("NodeEnergyScope", "node_energy_scope"),
        Column("NodeEnergyWindow", "node_energy_window"), Column("NodeEnergyWindow(s)", "node_window_s"),
        Column("NodeMeanPower/node(W)", "node_power_w_per_node"), Column("Work/NodeWh", "work_per_node_wh"),
        Column("NodeEnergySource", "node_energy_source"), Column("NodeEnergyState", "node_energy_state"),
        Column("NodeEnergyNote", "node_energy_reason"), Column("Flags", "flags"),
        Column("Commit", "suite_version"), Column("Torch", "torch"), Column("Date", "date"),
        Column("Status", "state"), Column("Error", "reason"), Column("WorkPackage", "work_package"))


def columns(benchmark: str | None) -> tuple[Column, ...]:
    """The head, the benchmark's own set and the tail."""
    try:
        entry = benchmarks.find(benchmark)
    except benchmarks.UnknownBenchmark:  # a site's registry that fails: the row's cause names it
        entry = None
    return (*HEAD, *(entry.table_columns if entry else ()), *TAIL)


def cells(row: Row) -> dict[str, object]:
    """Every value a column may show: the row's words (its fields and the
    tables' labels), its details, and the reason and flags whole (the
    verdict of a row that is no measurement with its reason)."""
    return {**row.details, **render.words(row), "reason": report.one_line(render.cause(row)),
            "node_energy_reason": report.one_line(row.node_energy_reason or "") or None,
            "flags": " ".join(row.flags) or "none", "work_package": row.work_package}


def _cell(value: object, form: str | None) -> str:
    if value is None or value == "-":
        return ""
    if form and isinstance(value, (SupportsFloat, str)):
        try:
            return format(float(value), form)
        except ValueError:
            pass
    return str(value)


def _order(row: Row) -> tuple:
    return (row.system_name or "", row.model or "", row.precision or "", row.compile or "",
            row.global_batch or 0)


def table(run_dir: Path) -> str:
    """The run's full table: one line per row, sorted as JUBE's tables."""
    rows = sorted(rows_of_run(run_dir, slurm_state=lambda job_id: None), key=_order)
    cols = columns(next((r.benchmark for r in rows if r.benchmark), None))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([c.title for c in cols])
    for row in rows:
        values = cells(row)
        writer.writerow([_cell(values.get(c.field), c.format) for c in cols])
    return out.getvalue()


def write(run_dir: Path) -> Path:
    """The file, replaced whole: jobs on several nodes may write it at once."""
    path = run_dir / FILE
    path.parent.mkdir(exist_ok=True)
    part = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.part")
    try:
        part.write_text(table(run_dir))
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    try:
        path = write(jube_run.last_run(Path(args[0])))
    except (OSError, ValueError, ET.ParseError) as error:
        report.error(f"the full table could not be written: {error}")
        return 1
    sys.stdout.write(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
