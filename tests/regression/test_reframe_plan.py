"""A check's work package planned by the benchmark's own JUBE script (a dry
run): the job script JUBE would submit, its parameters, the data step's
preparation, the scheduler's resources; and the row decided outside JUBE."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from caraml import benchmarks
from caraml.regression.plan import (
    Plan,
    PlanError,
    data_step,
    job_resources,
    plan,
    prepare_data,
    seconds,
)
from caraml.row.standalone import main as row_main

IMAGE = benchmarks.get("image")
LLM = benchmarks.get("llm")


def test_the_data_step_is_the_jube_scripts_own_command_with_its_exported_variables():
    params = {"prepare_args": "-m prep --size 'cpu small'", "CARAML_DATA_DIR": "/d", "data_dir": "/x"}
    assert data_step(params, "prepare_args") == (["-m", "prep", "--size", "cpu small"],
                                                 {"CARAML_DATA_DIR": "/d"})
    with pytest.raises(PlanError, match="parameter 'prepare_cmd' is not one"):
        data_step(params, "prepare_cmd")


@pytest.mark.parametrize("limit, expected", [("00:20:00", 1200), ("30", 1800), ("05:30", 330),
                                             ("1-02:00:00", 93600)])
def test_slurm_time_limits_in_seconds(limit, expected):
    assert seconds(limit) == expected


def test_a_malformed_time_limit_names_the_parameter():
    with pytest.raises(PlanError, match="platform.xml timelimit"):
        seconds("1:2:3:4")


def test_resources_are_the_job_scripts_sbatch_lines():
    params = {"nodes": "2", "tasks_per_node": "4", "cpus_per_task": "72", "job_timelimit": "00:30:00",
              "gres": "gpu:4", "gpus_per_task": "1", "signal_lead_s": "120"}
    # the warning before the time limit, as in JUBE's job (job.sh is the batch shell)
    assert job_resources(params) == {"num_tasks": 8, "num_tasks_per_node": 4, "num_cpus_per_task": 72,
                                     "time_limit": 1800, "options": ["--gres=gpu:4", "--gpus-per-task=1",
                                                                     "--signal=B:USR1@120"]}


@pytest.mark.jube
def test_the_plan_is_the_job_script_jube_writes_for_the_system(tmp_path):
    planned = plan(IMAGE, ["CPU", "smoke"], tmp_path)
    script = planned.job_script.read_text()
    assert planned.job_script == tmp_path / "job.sh"
    assert "-m image_classification.image_classification_torch --model resnet18" in script
    assert "--global-batch-size 8" in script and "--energy-methods auto" in script
    assert "torch.distributed.run" in script and "\nsrun " not in script
    params = json.loads((tmp_path / "params.json").read_text())
    assert (params["system_name"], params["global_batch_size"], params["dry_run"]) == ("CPU", "8", "no")
    assert planned.prepare == []


@pytest.mark.jube
def test_the_slurm_plan_starts_the_ranks_with_srun(tmp_path):
    planned = plan(IMAGE, ["CPU", "smoke", "slurm"], tmp_path)
    assert "\nsrun --kill-on-bad-exit=1" in planned.job_script.read_text()


@pytest.mark.jube
def test_the_data_step_takes_the_data_work_packages_values(tmp_path):
    planned = plan(LLM, ["CPU", "smoke"], tmp_path, environ=None)
    assert planned.prepare[-2:] == ["--model-size", "cpu-small"]
    assert planned.prepare_env["CARAML_DATA_DIR"].endswith("llm_training/llm_data")
    assert planned.prepare_env["CARAML_DEFAULT_CORPUS"] == "local"
    assert planned.prepare[2:5] == ["--run", "data step", "--"]
    assert "@prepare_data/data.args" in planned.job_script.read_text()


@pytest.mark.jube
def test_tags_that_select_several_work_packages_are_refused(tmp_path):
    # the CPU sweep without smoke: batches 8, 16 and 32
    with pytest.raises(PlanError, match="3 execute work packages, not one"):
        plan(IMAGE, ["CPU"], tmp_path)


@pytest.mark.jube
def test_a_refused_work_package_gives_the_pre_flight_line(tmp_path):
    with pytest.raises(PlanError, match="NOSUCH"):
        plan(IMAGE, ["NOSUCH", "smoke"], tmp_path)


def test_a_job_that_failed_is_a_failed_row_with_its_cause(tmp_path, capsys):
    (tmp_path / "params.json").write_text(json.dumps({"system_name": "CPU", "nodes": "1",
                                                      "devices_per_node": "1"}))
    (tmp_path / "job.out").write_text("CARAML job: start=2026-01-01T00:00:00 host=h job_id=none\n"
                                      "CARAML job: end=2026-01-01T00:00:05 status=1\n")
    (tmp_path / "error").write_text("job exited with status 1: RuntimeError: broken\n")
    assert row_main(["--benchmark", "image", "--params", str(tmp_path / "params.json"), str(tmp_path)]) == 0
    row = json.loads((tmp_path / "row.json").read_text())
    assert (row["state"], row["reason"]) == ("failed", "job exited with status 1: RuntimeError: broken")
    assert "CARAML row: state=failed" in capsys.readouterr().out
    assert (tmp_path / "jpwr.out").read_text().startswith("CARAML energy: none")


def test_unreadable_parameters_are_a_failed_row_that_names_the_file(tmp_path, capsys):
    (tmp_path / "params.json").write_text("[1, 2]")
    row_main(["--benchmark", "image", "--params", str(tmp_path / "params.json"), str(tmp_path)])
    row = json.loads((tmp_path / "row.json").read_text())
    assert row["state"] == "failed"
    assert "not a JSON object" in row["reason"]
    assert "params.json" in capsys.readouterr().err


def test_a_failed_data_step_raises_its_own_error_line(tmp_path):
    (tmp_path / "prepare_data").mkdir()
    failing = [sys.executable, "-c", "import sys; print('CARAML ERROR: no corpus here: set "
               "CARAML_LLM_CORPUS', file=sys.stderr); sys.exit(2)"]
    with pytest.raises(PlanError, match="the data step failed: no corpus here: set CARAML_LLM_CORPUS"):
        prepare_data(Plan(tmp_path / "job.sh", {}, failing, data_folder=tmp_path / "prepare_data"))


def test_a_data_step_that_does_not_end_is_stopped_and_named(tmp_path):
    (tmp_path / "prepare_data").mkdir()
    sleeping = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(PlanError, match="took more than 1 s"):
        prepare_data(Plan(tmp_path / "job.sh", {}, sleeping, data_folder=tmp_path / "prepare_data"),
                     timeout_s=1)


def test_no_data_step_runs_nothing(tmp_path):
    prepare_data(Plan(Path(tmp_path / "job.sh"), {}, []))
    assert not (tmp_path / "prepare_data").exists()
