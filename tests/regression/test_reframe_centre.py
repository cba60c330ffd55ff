"""ReFrame as a centre runs it: its own site configuration (partition names
in another case, its own environment names, a Slurm partition with the srun
launcher beside a local one), its own references written the ReFrame way in
a subclass, dry runs before real ones; and ReFrame's own log kept out of the
temporary folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.regression.test_reframe_runs import ROOT, _reframe

pytestmark = pytest.mark.jube


def _centre(tmp_path: Path, partitions: str, environs: str = '"gnu"') -> Path:
    config = tmp_path / "centre.py"
    config.write_text(f"""
site_configuration = {{
    "systems": [{{"name": "centre", "descr": "a login node", "hostnames": [".*"],
                 "partitions": [{partitions}]}}],
    "environments": [{{"name": {environs}}}],
}}
""")
    return config


LOCAL_CPU = '{"name": "cpu", "scheduler": "local", "launcher": "local", "environs": ["gnu"]}'


def test_reframe_leaves_no_log_in_the_temporary_folder(tmp_path):
    done = _reframe(tmp_path / "rfm", "-l")
    assert done.returncode == 0, done.stdout[-3000:]
    assert not list((tmp_path / "rfm" / "tmp").iterdir())
    assert (tmp_path / "rfm" / "reframe.log").is_file()
    assert f"Log file(s) saved in '{tmp_path / 'rfm' / 'reframe.log'}'" in done.stdout


def test_listing_says_which_environment_names_it_looks_for(tmp_path):
    config = _centre(tmp_path, LOCAL_CPU)
    done = _reframe(tmp_path / "rfm", "-l", config=config)
    assert "Found 0 check(s)" in done.stdout
    assert ("the CARAML checks run in a programming environment named caraml or builtin, and no "
            "partition of system centre offers one (gnu): name the centre's with "
            "-S valid_prog_environs=gnu") in done.stdout + done.stderr
    done = _reframe(tmp_path / "rfm", "-l", "-S", "valid_prog_environs=gnu", config=config)
    assert "Found 3 check(s)" in done.stdout and "programming environment named" not in done.stdout


def test_a_partition_named_in_another_case_is_its_system_and_an_unknown_one_is_refused(tmp_path):
    config = _centre(tmp_path, LOCAL_CPU + ', {"name": "gpu9", "scheduler": "local", '
                                            '"launcher": "local", "environs": ["gnu"]}')
    done = _reframe(tmp_path / "rfm", "--dry-run", "-n", "benchmark=image", "-S", "valid_prog_environs=gnu",
                    config=config)
    # `cpu` plans the CPU system's job; `gpu9` fails as it is set up, saying how to name the tag
    [job] = (tmp_path / "rfm" / "stage" / "centre" / "cpu").glob("gnu/*/job.sh")
    assert "CPU" in (job.parent / "params.json").read_text()
    assert "Failing phase: setup" in done.stdout
    assert ("partition centre:gpu9: gpu9 names no system of platform.xml (CPU, LOCAL, A100"
            in done.stdout), done.stdout[-3000:]
    assert "give the system's tag with -S system_tag=TAG" in done.stdout
    assert not list((tmp_path / "rfm" / "stage" / "centre" / "gpu9").glob("gnu/*/job.sh"))


def test_a_dry_run_writes_no_perflog_line(tmp_path):
    done = _reframe(tmp_path / "rfm", "--dry-run", "--system", "local:cpu", "-n", "benchmark=image")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "dry run: " in done.stdout and "planned, nothing measured or logged" in done.stdout
    assert not list((tmp_path / "rfm").rglob("perflogs/**/*.log"))


# A centre's own check: the suite's operator check with a reference of the
# centre's for its Slurm partition, written the ReFrame way
CENTRE_CHECK = f"""
import reframe as rfm
from reframe.utility import import_module_from_file

caraml = import_module_from_file({str(ROOT / "regression" / "checks" / "caraml_checks.py")!r})


@rfm.simple_test
class CentreOperator(caraml.Caraml_operator):
    reference = {{"centre:batch": {{"samples_per_s_per_device": (1e6, -0.1, None, "samples/s per host")}}}}
"""


@pytest.mark.slurm
def test_a_centres_configuration_runs_on_slurm_with_srun_and_locally_with_its_own_reference(tmp_path, slurm):
    config = _centre(tmp_path, '{"name": "batch", "scheduler": "squeue", "launcher": "srun", '
                               '"environs": ["gnu"], "extras": {"caraml_tags": ["CPU", "slurm"]}}, '
                     + LOCAL_CPU)
    checks = tmp_path / "centre_checks.py"
    checks.write_text(CENTRE_CHECK)
    # the centre's reference file: a band the CPU meets, looser than the subclass's
    refs = tmp_path / "refs.yaml"
    refs.write_text("references:\n"
                    "  - {system: CPU, benchmark: operator, model: FNO rbc2d-small, "
                    "figure: throughput_per_device, value: 1, lower: 0.5, upper: 1000000, "
                    "kind: measured by this suite, source: a test}\n")
    prefix = tmp_path / "rfm"
    # importing the suite's checks registers them too: the centre picks its own by name;
    # both measure (the measure tag), as a smoke run's figures meet no reference
    args = ["-c", str(checks), "-n", "CentreOperator", "-S", "valid_prog_environs=gnu",
            "-S", f"references_file={refs}", "-S", "suite_references=false", "-S", "extra_tags=measure"]
    dry = _reframe(prefix, "--dry-run", *args, config=config, env=slurm.env)
    assert dry.returncode == 0, dry.stdout[-3000:]
    done = _reframe(prefix, "-r", *args, config=config, env=slurm.env)
    # the Slurm partition's check fails its performance on the centre's own
    # reference, the stricter; the local one passes on the file's
    assert done.stdout.count("FAILURE INFO for ") == 1, done.stdout[-4000:]
    assert "System partition: centre:batch" in done.stdout and "Failing phase: performance" in done.stdout
    assert re.search(r"failed to meet reference\(s\): samples_per_s_per_device=\S+ samples/s per host, "
                     r"expected 1000000", done.stdout), done.stdout[-3000:]
    # the dry run logged nothing, so the real run's lines start each perflog: none rotated
    perflogs = prefix / "perflogs" / "centre"
    assert sorted(p.name for p in perflogs.rglob("*") if p.is_file()) == ["CentreOperator.log"] * 2
    batch = (perflogs / "batch" / "CentreOperator.log").read_text().splitlines()
    local = (perflogs / "cpu" / "CentreOperator.log").read_text().splitlines()
    assert len(batch) == len(local) == 2  # the header and the run's line
    header = batch[0].split("|")
    record = dict(zip(header, batch[1].split("|")))
    assert (record["samples_per_s_per_device_ref"], record["samples_per_s_per_device_lower_thres"]) == \
        ("1000000.0", "-0.1")
    assert float(record["samples_per_s_per_device_value"]) > 0 and record["caraml_status"] == "ok"
    assert record["caraml_measurement"] == "yes"
    record = dict(zip(local[0].split("|"), local[1].split("|")))
    assert record["samples_per_s_per_device_ref"] == "1.0" and record["caraml_status"] == "ok"
    assert record["caraml_measurement"] == "yes"
    # the batch job ran job.sh once, as its batch shell, and job.sh started the rank with srun
    [work] = [w for folder in ("output", "stage")
              for w in (prefix / folder / "centre" / "batch").rglob("job.out")]
    assert "job_id=none" not in work.read_text()
    assert "\nsrun --kill-on-bad-exit=1" in (work.parent / "job.sh").read_text()
    assert "\nexec bash job.sh >job.out 2>job.err\n" in (work.parent / "rfm_job.sh").read_text()
