"""ReFrame run for real on the suite's checks: on this host with the local
scheduler (both benchmarks, CPU smoke), through the one-node Slurm test
cluster, and with a reference the CPU cannot meet, which ReFrame must report
as a performance failure."""

from __future__ import annotations

import os
import re
import subprocess
import sys
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


def _reframe(prefix: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in (env or os.environ).items() if k != "CARAML_REFERENCES"}
    env["RFM_REPORT_FILE"] = str(prefix / "report.json")
    return subprocess.run([*REFRAME, "-C", str(ROOT / "regression" / "config.py"),
                           "-c", str(ROOT / "regression" / "checks"), "--prefix", str(prefix), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _perflog(prefix: Path, system: str, partition: str) -> list[dict[str, str]]:
    """The perflog's records, each as its fields: name=value, and for each
    performance variable VAR its VAR.unit, VAR.ref, VAR.lower and VAR.upper."""
    lines = (prefix / "perflogs" / system / partition / "CaramlBenchmark.log").read_text().splitlines()
    records = []
    for line in lines[1:]:  # the first is the header
        parts = line.split("|")
        fields, current = {"check": parts[2]}, None
        for i, part in enumerate(parts):
            name, sep, value = part.partition("=")
            if not sep:
                continue
            if name in ("ref", "lower", "upper") and current:
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


def test_every_benchmark_passes_on_this_host_and_its_perflog_carries_figures_and_provenance(tmp_path):
    # the suite's CPU references are for a quiet host's default configuration;
    # this shared test host's smoke runs are checked against no reference here
    done = _reframe(tmp_path, "-r", "--system", "local:cpu", "-S", "suite_references=false")
    _passed(done)
    assert "Ran 3/3 test case(s)" in done.stdout
    records = {r["check"]: r for r in _perflog(tmp_path, "local", "cpu")}
    image = records["CaramlBenchmark %benchmark=image %configuration=smoke"]
    llm = records["CaramlBenchmark %benchmark=llm %configuration=smoke"]
    fno = records["CaramlBenchmark %benchmark=operator %configuration=smoke"]
    assert float(image["images_per_s"]) > 0 and float(llm["tokens_per_s_per_device"]) > 0
    assert float(fno["samples_per_s"]) > 0
    # the measured matmul rate divides, or (a host too busy to measure it) the flags say why not
    assert (0 < float(llm.get("mfu", "nan")) < 1 or "mfu-not-available(" in llm["flags"]) \
        and "mfu" not in image
    for record, work in ((image, "images"), (llm, "tokens"), (fno, "samples")):
        assert record[f"{work}_per_wh_host_estimate.unit"] == \
            f"{work}/Wh (host-estimate, timed window, estimated)"
        assert float(record[f"{work}_per_wh_host_estimate"]) > 0
        assert float(record["power_w_per_device"]) > 0
        assert (record["system"], record["status"], record["energy_scope"], record["energy"]) == \
            ("CPU", "ok", "host-estimate", "estimated")
        assert record["energy_methods"] == "estimate"
        assert re.fullmatch(r"[0-9a-f]{12}", record["commit"])
        assert record["torch"].startswith(torch.__version__.split("+")[0])
    assert llm["config"] == "cpu-small fp32 batch 4"
    assert fno["config"].startswith("FNO rbc2d-small fp32")
    # the row and the energy files of every rank are kept beside ReFrame's output
    out = tmp_path / "output" / "local" / "cpu" / "caraml"
    rows = sorted(out.glob("*/row.json"))
    assert len(rows) == 3 and all(list(p.parent.glob("energy/*_rank0*")) for p in rows)


def test_a_reference_the_cpu_cannot_meet_is_a_performance_failure(tmp_path):
    refs = tmp_path / "centre_references.yaml"
    refs.write_text("references:\n"
                    "  - {system: CPU, benchmark: image, model: resnet18, figure: throughput_per_device,"
                    " value: 1000000, lower: 0.1, upper: 0.1, kind: measured by this suite, source: a test}\n")
    done = _reframe(tmp_path / "rfm", "-r", "--system", "local:cpu", "-n", "benchmark=image",
                    "-S", f"references_file={refs}")
    assert done.returncode != 0
    assert "FAILURE INFO for CaramlBenchmark %benchmark=image %configuration=smoke" in done.stdout
    assert "Failing phase: performance" in done.stdout
    assert re.search(r"failed to meet reference\(s\): images_per_s_per_device=\S+ images/s per host, "
                     r"expected 1000000", done.stdout), done.stdout[-3000:]
    [record] = _perflog(tmp_path / "rfm", "local", "cpu")
    assert [record[f"images_per_s_per_device.{k}"] for k in ("ref", "lower", "upper")] == \
        ["1000000.0", "-0.1", "0.1"]
    # a figure without a reference is logged without one
    assert record["images_per_s.ref"] == "0"


@pytest.mark.slurm
def test_every_check_runs_through_the_slurm_test_cluster(tmp_path, slurm):
    done = _reframe(tmp_path, "-r", "--system", "slurm-cpu", env=slurm.env)
    _passed(done)
    records = {r["check"]: r for r in _perflog(tmp_path, "slurm-cpu", "default")}
    for benchmark, work in (("image", "images"), ("llm", "tokens"), ("operator", "samples")):
        record = records[f"CaramlBenchmark %benchmark={benchmark} %configuration=smoke"]
        assert record["status"] == "ok" and float(record[f"{work}_per_s"]) > 0
    works = sorted((tmp_path / "output" / "slurm-cpu" / "default" / "caraml").glob("*"))
    assert len(works) == 3
    for work in works:
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
    assert "Failing phase: performance" in done.stdout
    assert f"{refs}: entry 1 (CPU ? ?): missing model figure value" in done.stdout
