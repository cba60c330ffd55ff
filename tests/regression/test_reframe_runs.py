"""ReFrame run for real on the suite's checks: under a centre's own
minimal site configuration (the three CPU smoke checks, no measurements:
each figure an expected failure naming the verdict, never a pass), on this
host's two local partitions (one job at a time), through the one-node Slurm
test cluster with the image check measuring (the measure tag) against a
reference the CPU cannot meet, which ReFrame must report as a performance
failure, and as a dry run for a JSC system. The rows of the runs, and no
row of the dry runs that plan them, join the history ReFrame is pointed at."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.jube
# the console script the reframe extra installs; else the same entry point from this Python
SCRIPT = Path(sys.executable).with_name("reframe")
REFRAME = [str(SCRIPT)] if SCRIPT.exists() else [
    sys.executable, "-c",
    "import sys; from reframe.frontend.cli import main; sys.argv[0] = 'reframe'; main()"]


# a centre's own configuration: none of the suite's keys; the partition's
# name is the system's platform.xml tag
CENTRE_CONFIG = """
site_configuration = {
    "systems": [{"name": "centre", "descr": "a login node", "hostnames": [".*"],
                 "partitions": [{"name": "CPU", "scheduler": "local", "launcher": "local",
                                 "environs": ["builtin"]}]}],
    "environments": [{"name": "builtin"}],
}
"""


def _reframe(prefix: Path, *args: str, env: dict | None = None,
             config: Path = ROOT / "regression" / "config.py") -> subprocess.CompletedProcess:
    env = {k: v for k, v in (env or os.environ).items() if k != "CARAML_REFERENCES"}
    env["RFM_REPORT_FILE"] = str(prefix / "report.json")
    # ReFrame polls a running job ever more slowly, down to once in 10 s
    # (poll_rate_min 0.1/s, kind to a centre's scheduler); these jobs run on
    # this host or the tests' own cluster, so once a second sees their end sooner
    env["RFM_POLL_RATE_MIN"] = "1"
    # ReFrame writes its start-up log (rfm-*.log) into the temporary folder
    # whatever the configuration; the test's own folder takes it
    env["TMPDIR"] = str(prefix / "tmp")
    (prefix / "tmp").mkdir(parents=True, exist_ok=True)
    return subprocess.run([*REFRAME, "-C", str(config),
                           "-c", str(ROOT / "regression" / "checks"), "--prefix", str(prefix), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _perflog(prefix: Path, system: str, partition: str, benchmark: str) -> list[dict[str, str]]:
    """The records of a benchmark's perflog in the suite's format
    (regression/config.py), each as its fields: name=value, and for each
    performance variable VAR its VAR.unit, VAR.ref, VAR.lower and VAR.upper."""
    lines = (prefix / "perflogs" / system / partition / f"Caraml_{benchmark}.log").read_text().splitlines()
    records = []
    for line in lines[1:]:  # the first is the header
        parts = line.split("|")
        fields, current = {"check": parts[2]}, None
        for i, part in enumerate(parts):
            name, sep, value = part.partition("=")
            if not sep:
                continue
            if name in ("ref", "lower", "upper", "result") and current:
                fields[f"{current}.{name}"] = value
                continue
            fields[name] = value
            if i + 1 < len(parts) and "=" not in parts[i + 1]:
                current = name
                fields[f"{name}.unit"] = parts[i + 1]
        records.append(fields)
    return records


def _passed(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def _reframe_columns(log: Path) -> list[dict[str, str]]:
    """ReFrame's default perflog (a centre's configuration without a format): header and records."""
    header, *lines = log.read_text().splitlines()
    return [dict(zip(header.split("|"), line.split("|"))) for line in lines]


def _history(path: Path) -> list[tuple]:
    """Each row the history holds: benchmark, state, whether from a dry run, whether a measurement."""
    with sqlite3.connect(path) as con:
        return sorted(con.execute("select benchmark, state, dry_run, measurement from history").fetchall())


def test_the_smoke_checks_are_expected_failures_under_a_centres_own_configuration(tmp_path):
    config = tmp_path / "centre.py"
    config.write_text(CENTRE_CONFIG)
    history = tmp_path / "history.sqlite"
    # the suite's CPU references are for a quiet host's default configuration;
    # this shared test host's smoke runs are checked against no reference here
    done = _reframe(tmp_path / "rfm", "-r", "-S", "suite_references=false", config=config,
                    env={**os.environ, "CARAML_HISTORY": str(history)})
    _passed(done)  # an expected failure fails no run
    assert "Ran 3/3 test case(s)" in done.stdout
    logs = tmp_path / "rfm" / "perflogs" / "centre" / "CPU"
    assert sorted(p.name for p in logs.iterdir()) == ["Caraml_image.log", "Caraml_llm.log",
                                                      "Caraml_operator.log"]
    [image], [llm], [fno] = (_reframe_columns(logs / f"Caraml_{b}.log") for b in ("image", "llm", "operator"))
    assert "mfu_value" in llm and "mfu_value" not in image
    for record, work in ((image, "images"), (llm, "tokens"), (fno, "samples")):
        # a smoke run's figures are no measurement: in the perflog as nan, never a figure to trust
        assert record["caraml_measurement"].startswith("not a measurement (") \
            and "a measurement needs 20 and 60 s" in record["caraml_measurement"]
        assert record[f"{work}_per_s_value"] == record[f"{work}_per_wh_value"] == "nan"
        assert record[f"{work}_per_wh_unit"] == f"{work}/Wh (host-estimate, timed window, estimated)"
        assert (record["caraml_system"], record["caraml_status"], record["caraml_energy_scope"]) == \
            ("CPU", "ok", "host-estimate")
        assert re.fullmatch(r"[0-9a-f]{12}(\+changes)?", record["caraml_commit"])
        assert record["caraml_torch"].startswith(torch.__version__.split("+")[0])
    assert llm["caraml_config"] == "cpu-small fp32 batch 4"
    # the tags its job was planned with, the operator's problem among them
    assert [r["caraml_tags"] for r in (image, llm, fno)] == ["CPU smoke", "CPU smoke", "CPU rbc2d smoke"]
    # each XFAIL line says the verdict once, after the variables it holds for
    xfails = [line for line in done.stdout.splitlines() if "XFAIL" in line]
    assert len(xfails) == 3 and all(line.count("not a measurement (") == 1 for line in xfails), xfails
    assert any("tokens_per_s, tokens_per_s_per_device, tokens_per_s_per_node, mfu, tokens_per_wh, "
               "power_w_per_device: not a measurement (" in line for line in xfails), xfails
    # each check's row of its run joined the history; the JUBE dry runs that planned them left none
    assert _history(history) == [("image", "ok", 0, 0), ("llm", "ok", 0, 0), ("operator", "ok", 0, 0)]
    # one benchmark alone, its tag now from the check variable: its perflog
    # gains a line under the same columns, and no other perflog is rotated
    header = (logs / "Caraml_operator.log").read_text().splitlines()[0]
    done = _reframe(tmp_path / "rfm", "-r", "-n", "benchmark=operator", "-S", "suite_references=false",
                    "-S", "system_tag=CPU", config=config)
    _passed(done)
    assert sorted(p.name for p in logs.iterdir()) == ["Caraml_image.log", "Caraml_llm.log",
                                                      "Caraml_operator.log"]
    lines = (logs / "Caraml_operator.log").read_text().splitlines()
    assert lines[0] == header and len(lines) == 3


def _job_window(work: Path) -> tuple[datetime, datetime]:
    text = (work / "job.out").read_text()
    start = re.search(r"^CARAML job: start=(\S+)", text, re.MULTILINE).group(1)
    end = re.search(r"^CARAML job: end=(\S+)", text, re.MULTILINE).group(1)
    return datetime.fromisoformat(start), datetime.fromisoformat(end)


def test_two_partitions_of_this_host_run_one_job_at_a_time_and_log_the_rows_provenance(tmp_path):
    done = _reframe(tmp_path, "-r", "-n", "benchmark=operator", "-S", "suite_references=false")
    _passed(done)
    assert "Ran 2/2 test case(s)" in done.stdout
    # an expected failure (a smoke run is no measurement) keeps its files in its stage folder
    cpu, host = (_job_window(next((tmp_path / "stage" / "local" / p / "caraml").glob("*")))
                 for p in ("cpu", "host"))
    assert cpu[1] <= host[0] or host[1] <= cpu[0], (cpu, host)
    [record] = _perflog(tmp_path, "local", "cpu", "operator")
    assert record["samples_per_s"] == "nan" and record["samples_per_s.result"] == "xfail"
    assert record["tags"] == "CPU rbc2d smoke"
    assert record["measurement"].startswith("not a measurement (")
    assert record["samples_per_wh.unit"] == "samples/Wh (host-estimate, timed window, estimated)"
    assert (record["system"], record["status"], record["energy_scope"], record["energy"]) == \
        ("CPU", "ok", "host-estimate", "estimated")
    assert record["energy_methods"] == "estimate"
    assert record["config"].startswith("FNO rbc2d-small fp32")
    # the row and the energy files of every rank are kept beside ReFrame's output
    [row] = (tmp_path / "stage" / "local" / "cpu" / "caraml").glob("*/row.json")
    assert list(row.parent.glob("energy/*_rank0*"))


def test_a_dry_run_for_a_jsc_system_shows_each_job_script_and_runs_nothing(tmp_path):
    done = _reframe(tmp_path, "--dry-run", "--system", "A100")
    _passed(done)
    assert done.stdout.count("DRY") == 3
    stages = sorted((tmp_path / "stage" / "A100" / "dc-gpu" / "caraml").glob("*"))
    assert [s.name.split("_")[1] for s in stages] == ["image", "llm", "operator"]
    for stage in stages:
        assert f"job script {stage / 'job.sh'}" in done.stdout
        batch = (stage / "rfm_job.sh").read_text()
        # JUBE's job, with its warning before the time limit, is the batch shell
        assert "#SBATCH --partition=dc-gpu" in batch and "#SBATCH --signal=B:USR1@120" in batch
        assert "\nexec bash job.sh >job.out 2>job.err\n" in batch
        assert "srun" in (stage / "job.sh").read_text()
        assert not (stage / "row.json").exists() and not (stage / "job.out").exists()
    # the LLM's data step prepared nothing
    assert not list((stages[1] / "prepare_data").iterdir())


@pytest.mark.slurm
def test_every_check_runs_through_the_slurm_test_cluster_and_a_measurement_misses_a_centres_reference(
        tmp_path, slurm):
    # a centre's reference for the image check that this CPU cannot meet
    refs = tmp_path / "centre_references.yaml"
    refs.write_text("references:\n"
                    "  - {system: CPU, benchmark: image, model: resnet18, figure: throughput_per_device,"
                    " value: 1000000, lower: 0.1, upper: 0.1, kind: measured by this suite,"
                    " source: a test}\n")
    history = tmp_path / "history.sqlite"
    # the image check measures (the measure tag: its iterations timed for 61 s); the others are smoke runs
    done = _reframe(tmp_path, "-r", "--system", "slurm-cpu", "-S", f"references_file={refs}",
                    "-S", "Caraml_image.extra_tags=measure",
                    env={**slurm.env, "CARAML_HISTORY": str(history)})
    assert done.returncode != 0
    # the image check alone fails, in its performance, naming figure and reference
    assert done.stdout.count("FAILURE INFO for ") == 1, done.stdout[-4000:]
    assert "FAILURE INFO for Caraml_image %configuration=smoke %benchmark=image" in done.stdout
    assert "Failing phase: performance" in done.stdout
    assert re.search(r"failed to meet reference\(s\): images_per_s_per_device=\S+ images/s per host, "
                     r"expected 1000000", done.stdout), done.stdout[-3000:]
    for benchmark, work in (("image", "images"), ("llm", "tokens"), ("operator", "samples")):
        [record] = _perflog(tmp_path, "slurm-cpu", "default", benchmark)
        assert record["status"] == "ok"
    [image] = _perflog(tmp_path, "slurm-cpu", "default", "image")
    assert image["measurement"] == "yes" and float(image["images_per_s"]) > 0
    # the check keeps its name (%configuration=smoke); its perflog names the tags that ran
    assert image["tags"] == "CPU slurm smoke measure"
    assert image["images_per_s_per_device.result"] == "fail"
    # the measured row joined the history, as the smoke rows did; the plans' dry runs left none
    assert _history(history) == [("image", "ok", 0, 1), ("llm", "ok", 0, 0), ("operator", "ok", 0, 0)]
    assert [image[f"images_per_s_per_device.{k}"] for k in ("ref", "lower", "upper")] == \
        ["1000000.0", "-0.1", "0.1"]
    # a figure without a reference is logged without one
    assert image["images_per_s.ref"] == "0"
    # ReFrame moves a passed check's files into its output folder; a
    # failed one and an expected failure (a row that is no measurement)
    # keep them in their stage folder
    where = ("slurm-cpu", "default", "caraml")
    works = {work.name: work for folder in ("output", "stage")
             for work in (tmp_path / folder).joinpath(*where).glob("*")}
    assert len(works) == 3, works
    for work in works.values():
        # each job ran under Slurm and started its rank with srun, as JUBE's job does
        assert "job_id=none" not in (work / "job.out").read_text()
        assert "\nsrun --kill-on-bad-exit=1" in (work / "job.sh").read_text()


def test_tags_that_plan_several_jobs_fail_the_check_with_one_line(tmp_path):
    # the precision tag sweeps fp32 and bf16 on CPUs: two work packages
    done = _reframe(tmp_path, "-r", "--system", "local:cpu", "-n", "benchmark=image",
                    "-S", "extra_tags=precision")
    assert done.returncode != 0
    assert "Failing phase: run" in done.stdout
    assert "has 2 execute work packages, not one: a check runs one configuration" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_a_broken_reference_file_is_named_in_the_failure(tmp_path):
    refs = tmp_path / "refs.yaml"
    refs.write_text("references: [{system: CPU, benchmark: image}]\n")
    done = _reframe(tmp_path / "rfm", "-r", "--system", "local:cpu", "-n", "benchmark=image",
                    "-S", f"references_file={refs}")
    assert done.returncode != 0
    # named as the check is set up, before its job costs a run
    assert "Failing phase: setup" in done.stdout, done.stdout[-3000:]
    assert f"{refs}: entry 1 (CPU ? ?): missing model figure value" in done.stdout
    assert not list((tmp_path / "rfm").rglob("job.out"))
