"""The job's node energy from the centre's own meters, as Slurm's energy
accounting reads them (AcctGatherEnergyType: acct_gather_energy/pm_counters
on HPE Cray EX nodes, ipmi, xcc, rapl, gpu): a figure of its own, beside
the accelerators' energy that jpwr measures, never added to it.

The job script takes two readings (aux/job.sh.in): `begin` at its first
line and `end` at its exit. Each asks `sstat` for the consumed energy of
the job step that runs on all of the job's nodes for all of its time: the
extern step (PrologFlags=Contain) or, in a one-node job, the batch step.
Slurm's plugin reads the meter when sstat asks, so the difference is the
nodes' energy between the two readings: the job script's run (window
`job`). sacct would give a job's energy only once it has ended, and only
where the cluster keeps an accounting database (slurmdbd); sstat needs
neither, and the figure lies in the run's folder when the job ends.

Where Slurm meters nothing (AcctGatherEnergyType none, or job accounting
that carries no energy), outside Slurm, or where no step covers every node
of the job, the file says so and why; it never holds an estimate.

    python3 -m caraml.job.node_energy begin FILE [--declared METER]
    python3 -m caraml.job.node_energy end FILE
    python3 -m caraml.job.node_energy show FILE

FILE (node_energy.json beside the job's energy folder) is described in
docs/node_energy.md; read_node_energy() reads it. Standard library only:
the job script runs it with the node's python3."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from caraml import report

FORMAT = "caraml-node-energy-1"
FILE_NAME = "node_energy.json"
WINDOW = "job"
# what each of Slurm's energy plugins meters, as jpwr names scopes; the
# figure is a node's only where the plugin meters the whole node
PLUGIN_SCOPES = {"pm_counters": "node", "ipmi": "node", "xcc": "node",
                 "rapl": "cpu-socket+dram", "gpu": "gpu"}
NODE = "node"
PLUGIN_PREFIX = "acct_gather_energy/"
# the states of a file: begun (read at the start, not yet at the end),
# measured, none (nothing meters the nodes), failed (a meter that did not answer)
BEGUN, MEASURED, NONE, FAILED = "begun", "measured", "none", "failed"
# what the reader adds: no file, a file it cannot read, a job that never read its end
MISSING, UNREADABLE, INCOMPLETE = "missing", "unreadable", "incomplete"
TIMEOUT_S = 60
# Slurm's "no value" (NO_VAL64) and anything near it is no reading
NO_READING = 2**63


class NoReading(RuntimeError):
    """Slurm gave no energy; the message says why, in one line."""


class NoStep(NoReading):
    """The job has no such step (sstat: "StepId=... not found running")."""


def _slurm(*argv: str) -> tuple[str, str]:
    """(stdout, stderr as one line) of a Slurm command that succeeded."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except FileNotFoundError:
        raise NoReading(f"{argv[0]} is not installed on {os.uname().nodename}") from None
    except subprocess.TimeoutExpired:
        raise NoReading(f"{' '.join(argv[:2])} did not answer within {TIMEOUT_S} s") from None
    said = " ".join(done.stderr.split())
    if done.returncode != 0:
        raise NoReading(f"{' '.join(argv)} failed: {said or f'exit status {done.returncode}'}")
    return done.stdout, said


def energy_plugins(config_text: str) -> tuple[list[str], str]:
    """(the energy plugins, the job accounting plugin) of `scontrol show config`."""
    values = {}
    for line in config_text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    plugins = [p.strip().removeprefix(PLUGIN_PREFIX)
               for p in values.get("AcctGatherEnergyType", "").split(",")]
    return ([p for p in plugins if p and p not in ("none", "(null)")],
            values.get("JobAcctGatherType", "(null)"))


def step_reading(step: str) -> dict:
    """The step's consumed energy so far, summed over its nodes, and when
    (the middle of the call: the plugin reads the meter while sstat asks).
    A node whose meter gave nothing leaves the whole step without a value."""
    asked = time.time()
    out, said = _slurm("sstat", "--noheader", "--parsable2", "--jobs", step,
                       "--format", "ConsumedEnergyRaw")
    answered = time.time()
    text = out.strip().splitlines()[0].strip() if out.strip() else ""
    if not text and "not found" in said:
        raise NoStep(f"sstat finds no step {step} ({said})")
    if not text.isdigit() or int(text) >= NO_READING:
        why = said or ("an empty value: Slurm's plugin read no meter on the step's nodes"
                       if not text else f"{text!r}")
        raise NoReading(f"sstat gives no energy for step {step} ({why})")
    return {"unix": (asked + answered) / 2, "joules": int(text)}


def _declaration(declared: str, plugins: list[str]) -> list[str]:
    """A note where platform.xml's node_meter is not what the cluster has."""
    cluster = "+".join(plugins) or NONE
    if not declared or declared == cluster:
        return []
    return [f"platform.xml declares node meter {declared} for this system but the cluster's "
            f"AcctGatherEnergyType is {cluster}: fix node_meter in platform.xml or ask the centre"]


def begin(environ: dict[str, str], declared: str) -> dict:
    """The file's content at the job's start: the first reading, or why
    there is none."""
    record: dict[str, Any] = {"format": FORMAT, "window": WINDOW, "declared": declared, "notes": []}
    job = environ.get("SLURM_JOB_ID")
    if not job:
        return {**record, "state": NONE, "reason": "the job ran outside Slurm (submit mode local): "
                                                   "no Slurm energy accounting meters its node"}
    record["job_id"] = job
    try:
        plugins, gather = energy_plugins(_slurm("scontrol", "show", "config")[0])
        record["notes"] = _declaration(declared, plugins)
        if not plugins:
            return {**record, "state": NONE, "reason": "the cluster meters no node: its "
                    "AcctGatherEnergyType is acct_gather_energy/none"}
        scopes = [PLUGIN_SCOPES.get(p, "unknown") for p in plugins]
        record.update(source="+".join(f"slurm-{PLUGIN_PREFIX}{p}" for p in plugins),
                      scope="+".join(scopes))
        if len(plugins) > 1:
            record["notes"].append(f"Slurm adds the readings of {' and '.join(plugins)} "
                                   "into one figure; it is no node figure")
        if gather.endswith("/none") or gather == "(null)":
            return {**record, "state": NONE, "reason": f"the cluster's JobAcctGatherType is {gather}: "
                    "Slurm keeps no job's energy (a centre sets jobacct_gather/linux or cgroup)"}
        nodes = int(environ.get("SLURM_JOB_NUM_NODES") or 1)
        record["nodes"] = _slurm("scontrol", "show", "hostnames",
                                 environ.get("SLURM_JOB_NODELIST", ""))[0].split()
        try:
            step, reading = f"{job}.extern", step_reading(f"{job}.extern")
        except NoStep as extern:
            if nodes != 1:
                return {**record, "state": NONE, "reason": f"the job runs on {nodes} nodes and Slurm "
                        f"has no step on all of them for all of its time ({extern}; the centre's "
                        "PrologFlags=Contain gives every job one)"}
            step, reading = f"{job}.batch", step_reading(f"{job}.batch")
    except (NoReading, ValueError) as err:
        return {**record, "state": FAILED, "reason": f"no node energy: {err}"}
    return {**record, "state": BEGUN, "step": step, "begin": reading}


def end(record: dict) -> dict:
    """The file's content at the job's end: the figure over the job."""
    if record.get("state") != BEGUN:
        return record  # none or failed since the start: nothing to read
    try:
        reading = step_reading(record["step"])
    except NoReading as err:
        return {**record, "state": FAILED, "reason": f"no node energy at the job's end: {err}"}
    spent = reading["joules"] - record["begin"]["joules"]
    if spent < 0:
        return {**record, "state": FAILED, "reason": f"step {record['step']}'s energy went down "
                f"({record['begin']['joules']} J -> {reading['joules']} J): its meter restarted"}
    duration = reading["unix"] - record["begin"]["unix"]
    return {**record, "state": MEASURED, "end": reading, "duration_s": duration,
            "energy_j": spent, "energy_wh": spent / 3600,
            "mean_w": spent / duration if duration > 0 else None}


def write(path: Path, record: dict) -> None:
    """Replaced whole: a reader never sees it half-written."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(partial, path)


@dataclass(frozen=True)
class NodeEnergy:
    """A job's node energy as its file records it. energy_wh is set only
    where Slurm measured it (state measured); node_wh only where that
    figure covers whole nodes (scope node)."""

    state: str
    reason: str
    energy_wh: float | None = None
    scope: str | None = None
    source: str | None = None
    window: str = WINDOW
    duration_s: float | None = None
    nodes: tuple[str, ...] = ()
    declared: str = ""
    notes: tuple[str, ...] = ()

    @property
    def node_wh(self) -> float | None:
        return self.energy_wh if self.scope == NODE else None


def read_node_energy(path: str | Path) -> NodeEnergy:
    """The figure of a job's node_energy.json; a missing, half-written or
    foreign file and a job that never took its end reading give a state
    that says so, with a reason naming the file."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return NodeEnergy(MISSING, f"{path} does not exist: the job recorded no node energy "
                                   "(it never started, or ran before the suite recorded it)")
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return NodeEnergy(UNREADABLE, f"{path} is not readable JSON ({report.one_line(str(err))})")
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        return NodeEnergy(UNREADABLE, f"{path} is not a node energy file of format {FORMAT}")
    common = {"scope": record.get("scope"), "source": record.get("source"),
              "window": record.get("window", WINDOW), "nodes": tuple(record.get("nodes", ())),
              "declared": record.get("declared", ""), "notes": tuple(record.get("notes", ()))}
    state = record.get("state")
    if state == BEGUN:
        return NodeEnergy(INCOMPLETE, f"the job ended before its node energy was read at its end "
                          f"(killed outright, or its node lost); sacct -j {record.get('job_id')} "
                          "-o ConsumedEnergyRaw may still have it", **common)
    if state == MEASURED:
        try:
            return NodeEnergy(MEASURED, "", energy_wh=float(record["energy_wh"]),
                              duration_s=float(record["duration_s"]), **common)
        except (KeyError, TypeError, ValueError):
            return NodeEnergy(UNREADABLE, f"{path} says measured but holds no energy_wh and duration_s")
    if state in (NONE, FAILED):
        return NodeEnergy(state, str(record.get("reason", "")), **common)
    return NodeEnergy(UNREADABLE, f"{path} has an unknown state {state!r}")


def line(energy: NodeEnergy) -> str:
    """The figure as one `CARAML node energy:` line."""
    return report.line("node energy", {
        "state": energy.state,
        "wh": energy.energy_wh if energy.energy_wh is not None else "-",
        "scope": energy.scope or "-", "window": energy.window, "source": energy.source or "-",
        "nodes": "+".join(energy.nodes) or "-",
        "duration_s": energy.duration_s if energy.duration_s is not None else "-"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m caraml.job.node_energy",
                                     description="The job's node energy from Slurm's energy accounting.")
    parser.add_argument("action", choices=("begin", "end", "show"))
    parser.add_argument("file", type=Path)
    parser.add_argument("--declared", default="", metavar="METER",
                        help="the system's node_meter in platform.xml")
    args = parser.parse_args(argv)
    if args.action == "show":
        energy = read_node_energy(args.file)
        print(line(energy))
        for said in (energy.reason, *energy.notes):
            if said:
                print(f"CARAML node energy note: {report.one_line(said)}")
        return 0
    try:
        if args.action == "begin":
            write(args.file, begin(dict(os.environ), args.declared))
        else:
            record = json.loads(args.file.read_text()) if args.file.is_file() else {
                "format": FORMAT, "window": WINDOW, "state": FAILED, "notes": [],
                "reason": "the job script took no reading at its start"}
            write(args.file, end(record))
    except (OSError, ValueError) as err:
        # a warning, not an error: the job's figures stand, its row says it has no node figure
        report.warning(f"cannot record the job's node energy in {args.file} "
                     f"({report.one_line(str(err))}); the rest of the job's results stand")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
