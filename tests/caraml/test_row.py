"""The row model: every state of the one vocabulary, the flags, MFU with its
peak and the peak's basis, and the energy headline with its scope and
window, decided from the files a JUBE work package holds."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shutil
import xml.etree.ElementTree as ET

import pytest

from caraml import benchmarks
from caraml.regression import figures
from caraml.report import last_kv
from caraml.row import jube_lines, render, row_json
from caraml.row.decide import decide_row
from caraml.row.evidence import gather
from caraml.row.record import FIELDS, KINDS
from caraml.row.run import decide_now, rows_of_run
from caraml.row.status import STATES
from tests.caraml.row_packages import (
    IMAGE_GLOBAL,
    JPWR,
    LLM_GLOBAL,
    OPERATOR_GLOBAL,
    START,
    execute,
    finished_job,
    run_dir,
    write,
)


def decide(tmp_path, benchmark="llm", params=None, jpwr=JPWR, jpwr_status=0, jpwr_err="",
           slurm=None, data_error=None, **files):
    run = run_dir(tmp_path, params, with_data_step=data_error is not None)
    work = execute(run)
    write(work, **files)
    if data_error is not None:
        (run / "000000_prepare_data" / "work" / "stderr").write_text(data_error)
    out = err = None
    if jpwr is not None:
        out, err = tmp_path / "jpwr.out", tmp_path / "jpwr.err"
        out.write_text(jpwr)
        err.write_text(jpwr_err)
    ev = gather(work, out, err, jpwr_status)
    return decide_row(benchmark, ev, slurm_state=lambda job_id: slurm)


def state(row):
    return row.state, row.reason


def test_a_finished_run_is_ok_and_measured(tmp_path):
    row = decide(tmp_path, job_out=finished_job())
    assert state(row) == ("ok", "")
    assert row.per_s == pytest.approx(104857.6)
    assert row.per_s_per_node == pytest.approx(104857.6)
    assert row.model == "800M" and row.global_batch == 512
    assert row.devices == 4 and row.tdp_w == 400.0
    assert row.commit == "1d3448ffe2ac" and row.date.startswith(
        "2026-11-24T05:00")
    assert list(row.flags) == []


def test_a_requeued_job_is_its_last_attempts_row_flagged_with_the_requeues(tmp_path):
    """A node failed mid-job and Slurm ran the job again: Slurm appends the
    attempts' output to job.out and job.err; the stopped attempt's stop,
    error and end lines are no part of the row."""
    first = "\n".join([START + " requeued=0", "CARAML stop: signal SIGTERM",
                       "CARAML job: end=2026-11-24T05:03:00+00:00 status=143", ""])
    again = START.replace("05:00:00", "05:04:00") + " requeued=1"
    row = decide(tmp_path, job_out=first + finished_job().replace(START, again),
                 job_err=f"{START} requeued=0\nCARAML ERROR: rank 1: node cn2 not responding\n"
                         f"{again}\n")
    assert state(row) == ("ok", "")
    assert row.requeued == 1 and "requeued(1)" in row.flags
    assert row.date.startswith("2026-11-24T05:04") and row.per_s == pytest.approx(104857.6)
    # a job never requeued says so, and has no flag
    plain = decide(tmp_path / "plain", job_out=finished_job().replace(START, START + " requeued=0"))
    assert plain.requeued == 0 and not [f for f in plain.flags if f.startswith("requeued")]


def test_a_measurement_window_that_ran_past_the_planned_iterations_is_ok(tmp_path):
    longer = LLM_GLOBAL.replace("iterations_total=100", "iterations_total=140")
    row = decide(tmp_path, job_out=finished_job(
        global_line=longer, stop="measurement window reached: at least 20 timed iterations lasting 61 s"))
    assert state(row) == ("ok", "") and row.flags == () and row.measurement


def test_a_signal_gives_ok_stopped_early_with_its_reason(tmp_path):
    row = decide(tmp_path, job_out=finished_job(stop="signal SIGUSR1"))
    assert state(row) == ("ok-stopped-early", "signal SIGUSR1")
    assert row.per_s is not None


def test_our_error_line_fails_the_row_with_it(tmp_path):
    row = decide(tmp_path, jpwr=None,
                 stderr="CARAML ERROR: global batch size 6 does not divide by 4 devices\n")
    assert state(row) == ("failed", "global batch size 6 does not divide by 4 devices")
    assert row.per_s is None and row.mfu is None


def test_a_job_that_exited_non_zero_fails_even_with_a_throughput_line(tmp_path):
    row = decide(tmp_path, job_out=finished_job(stop="signal SIGTERM", status=143))
    assert state(row) == ("failed", "job exited with status 143")
    assert row.per_s is None


def test_the_job_scripts_error_marker_names_the_cause(tmp_path):
    row = decide(tmp_path, job_out=finished_job(status=1),
                 error="job exited with status 1: rank 1 killed by SIGKILL on cn2\n")
    assert state(row) == ("failed", "job exited with status 1: rank 1 killed by SIGKILL on cn2")


def test_a_failed_data_step_is_the_rows_cause(tmp_path):
    row = decide(tmp_path, jpwr=None, data_error="CARAML ERROR: corpus no_such.jsonl not found\n")
    assert state(row) == ("failed", "corpus no_such.jsonl not found")


def test_a_combine_step_that_failed_after_the_job_ran_fails_the_row(tmp_path):
    row = decide(tmp_path, job_out=finished_job(), jpwr="", jpwr_status=1,
                 jpwr_err="Traceback ...\nValueError: energy_rank0.csv: no column 'time'\n")
    assert row.state == "failed"
    assert "jpwr combine exited with status 1" in row.reason
    assert "no column 'time'" in row.reason
    assert row.energy_scope is None and row.wh_run is None


def test_a_job_that_ended_without_its_figures_is_no_ok(tmp_path):
    row = decide(tmp_path, job_out=finished_job(global_line="iteration 3/100"))
    assert state(row) == ("failed", "the job ended without a throughput line: see job.out")


def test_a_dry_run_names_its_job_script_from_the_run_folder(tmp_path):
    job = "/runs/llm run/000003/000007_execute/work/job.sh"
    row = decide(tmp_path / "a", jpwr=None, stderr=f"CARAML dryrun: {job} written and not submitted\n")
    assert state(row) == ("dry-run", "job script 000003/000007_execute/work/job.sh written and not submitted")
    # a system whose partitions refuse a job without an account: the row says what to set
    row = decide(tmp_path / "b", jpwr=None, stderr=f"CARAML dryrun: {job} written and not submitted\n",
                 stdout="CARAML warning: no --account line: A100's partitions refuse such a job; "
                        "export CARAML_ACCOUNT=<your Slurm project> and run again\n")
    assert state(row) == ("dry-run", "no --account in 000003/000007_execute/work/job.sh: "
                                     "export CARAML_ACCOUNT=<project>")


def test_submitted_and_not_started_is_queued_or_pending_with_slurms_reason(tmp_path):
    assert state(decide(tmp_path / "a", jpwr=None)) == ("queued", "")
    row = decide(tmp_path / "b", jpwr=None, slurm=("PENDING", "Priority"),
                 stdout="Submitted batch job 42\n")
    assert state(row) == ("pending", "Priority")


def test_started_and_not_ended_is_running(tmp_path):
    assert state(decide(tmp_path, jpwr=None, job_out=START + "\n")) == ("running", "")


def test_a_job_that_ended_without_its_end_line_fails_naming_the_disk(tmp_path):
    # a full run folder took the end line; the done marker, an empty file, was still made.
    # The row once stayed `running` for good, after the space was freed too
    row = decide(tmp_path, jpwr=None, job_out=START + "\n" + LLM_GLOBAL + "\n", ready="")
    assert state(row) == ("failed", "the job ended and job.out lacks its end line: the run "
                                    "folder's disk was full or unwritable at the end; free it "
                                    "and run again")


def test_every_state_of_the_vocabulary_is_reached_above():
    # the tests above reach each state; a new state needs its own test
    assert set(STATES) == {"ok", "ok-stopped-early", "failed", "dry-run", "queued", "pending",
                           "running"}


def test_mfu_says_its_peak_and_where_the_peak_comes_from(tmp_path):
    mfu = decide(tmp_path / "a", job_out=finished_job())
    assert mfu.mfu == pytest.approx(0.410256) and mfu.peak_tflops == 312.0
    assert mfu.peak_basis == "datasheet" and "A100" in mfu.peak_source
    measured = LLM_GLOBAL.replace("peak_tflops=312 peak_basis=datasheet peak_key=A100",
                                  "peak_tflops=0.38 peak_basis=measured-matmul peak_key=-")
    mfu = decide(tmp_path / "b", job_out=finished_job(global_line=measured))
    assert mfu.peak_basis == "measured-matmul" and "measured" in mfu.peak_source
    # the driver names the table's entry it took (the system's or its device's): its source,
    # not one found again by the number (an MI250X and an MI250 differ by a few per cent)
    named = LLM_GLOBAL.replace("peak_tflops=312", "peak_tflops=181.05").replace(
        "peak_key=A100", "peak_key=MI250-GCD")
    mfu = decide(tmp_path / "d", job_out=finished_job(global_line=named))
    assert mfu.peak_tflops == 181.05 and "MI250 data sheet" in mfu.peak_source
    assert mfu.peak_windows is None  # a datasheet peak has no windows
    windowed = LLM_GLOBAL.replace(
        "peak_tflops=312 peak_basis=datasheet peak_key=A100",
        "peak_tflops=0.38 peak_basis=measured-matmul peak_key=- peak_windows=10 peak_min_tflops=0.1 "
        "peak_median_tflops=0.35 peak_spread_pct=73.7 mfu_unavailable=-")
    mfu = decide(tmp_path / "e", job_out=finished_job(global_line=windowed))
    assert (mfu.peak_windows, mfu.peak_min_tflops, mfu.peak_median_tflops, mfu.peak_spread_pct) == \
        (10, 0.1, 0.35, 73.7)
    stated = LLM_GLOBAL.replace("peak_tflops=312", "peak_tflops=300").replace("peak_key=A100",
                                                                               "peak_key=-")
    mfu = decide(tmp_path / "c", job_out=finished_job(global_line=stated))
    assert mfu.peak_source == "--peak-tflops 300 given to the driver"


def test_the_energy_headline_counts_its_scope_over_the_timed_window(tmp_path):
    row = decide(tmp_path, job_out=finished_job())
    assert row.energy_scope == "gpu" and row.energy_window == "timed"
    assert row.energy_estimated is False and row.energy_basis == "counter"
    assert row.wh_timed == 36.0 and row.work_per_wh_timed == pytest.approx(524288 / 36.0)
    assert row.power_w_per_device_timed == pytest.approx(9.0 * 3600 / 100.0)
    assert (row.wh, row.work_per_wh, row.power_w_per_device) == \
        (row.wh_timed, row.work_per_wh_timed, row.power_w_per_device_timed)  # the headline window's
    assert row.wh_run == 40.0 and row.work_per_wh_run == pytest.approx(1048576 / 40.0)
    assert row.energy_by_scope == {"gpu": 40.0, "module": 48.0} and row.energy_by_node == {"cn1": 40.0}
    # the accelerators alone over the whole run: the gpu scope's own figure
    assert row.work_per_wh_gpu == row.work_per_wh_run


def test_a_system_that_names_its_scope_gets_that_scopes_energy(tmp_path):
    row = decide(tmp_path, params={"energy_scope": "module"}, job_out=finished_job())
    assert row.energy_scope == "module"
    assert row.wh_run == 48.0 and row.wh_timed == 43.2
    # the accelerators alone: the run's work over the gpu scope's Wh
    assert row.work_per_wh_gpu == pytest.approx(1048576 / 40.0)


def test_an_estimate_is_labelled(tmp_path):
    estimated = JPWR.replace("methods=pynvml source=measured", "methods=estimate source=estimated")
    assert decide(tmp_path, job_out=finished_job(), jpwr=estimated).energy_estimated


# jpwr's summary of a run whose counted samples cover 11 % of it
PARTIAL = JPWR.replace("source=measured", "source=incomplete").replace("missing_pct=0.0",
                                                                        "missing_pct=88.76")


def test_a_partial_run_is_never_a_work_per_wh_and_says_what_it_covers(tmp_path):
    # the sensor gap: 0.266 Wh and 92,411 tokens/Wh from 13 % of the run
    jpwr = PARTIAL.replace("counted=yes total_wh=36.0", "counted=yes total_wh=nan")
    row = decide(tmp_path, job_out=finished_job(), jpwr=jpwr)
    assert [f for f in list(row.flags) if f.startswith("energy")] == [
        "energy-incomplete(covers-11%-of-the-run-window)"]
    assert row.energy_window == "run"
    assert (row.work_per_wh_run, row.work_per_wh_timed) == (None, None)
    assert not row.energy_complete_run and not row.energy_complete_timed
    # the one verdict: a row whose headline energy is not whole is no measurement
    assert row.not_a_measurement == "its energy is not whole (its samples cover 11 % of the run)"
    fields = render.words(row)
    # the partial figure stays, labelled; the ratio cell is empty
    ratios = ("work_per_wh", "work_per_wh_run", "work_per_wh_timed")
    assert [fields.get(name) for name in ratios] == [None] * 3
    assert (fields["wh"], fields["wh_run"], fields["energy_window"]) == ("40", "40", "run")
    # one word for how the headline was had, in every rendering
    assert (fields["energy_kind"], fields["energy_source"]) == ("incomplete", "incomplete(pynvml)")
    assert figures.provenance(row)["energy_kind"] == "incomplete"
    assert figures.provenance(row)["energy_methods"] == "pynvml"


def test_a_whole_timed_window_stays_the_headline_of_a_partial_run(tmp_path):
    # the timed window's figure comes from the GPUs' counters, whole
    row = decide(tmp_path, job_out=finished_job(), jpwr=PARTIAL)
    assert row.energy_window == "timed"
    assert row.work_per_wh_timed == pytest.approx(524288 / 36.0)
    assert row.work_per_wh_run is None
    assert "energy-incomplete(covers-11%-of-the-run-window)" in list(row.flags)
    assert row.measurement  # its headline is whole
    fields = render.words(row)
    assert (fields["energy_kind"], fields["energy_source"]) == ("measured", "measured(pynvml)")


def test_energy_lost_without_a_percentage_and_a_timed_window_with_a_gap(tmp_path):
    # jpwr combine says nan where a file could not be read, and leaves a
    # window whose samples have a gap without a figure
    jpwr = (JPWR.replace("source=measured", "source=incomplete")
            .replace("missing_pct=0.0", "missing_pct=nan")
            .replace("counted=yes total_wh=36.0", "counted=yes total_wh=nan"))
    row = decide(tmp_path, job_out=finished_job(), jpwr=jpwr)
    assert "energy-incomplete(covers-an-unknown-share-of-the-run-window)" in list(row.flags)
    assert not any("%" in flag for flag in list(row.flags))
    assert row.wh_timed is None and row.work_per_wh_timed is None and row.energy_complete_timed is False
    assert "work_per_wh" not in render.words(row)
    assert row.not_a_measurement == "its energy is not whole (its samples cover an unknown share of the run)"


def test_a_gap_in_the_timed_window_of_a_whole_run_makes_the_run_the_headline(tmp_path):
    jpwr = JPWR.replace("counted=yes total_wh=36.0", "counted=yes total_wh=nan")
    row = decide(tmp_path, job_out=finished_job(), jpwr=jpwr)
    assert row.energy_window == "run" and not list(row.flags)
    assert row.work_per_wh == row.work_per_wh_run == pytest.approx(1048576 / 40.0)
    assert row.measurement


def test_competition_from_outside_the_job_is_flagged_and_its_own_load_is_not(tmp_path):
    busy = ("CARAML host at end: load=3.9 cpus=2 other_benchmarks=1 foreign_cpu_pct=47.0")
    row = decide(tmp_path / "a", job_out=finished_job(at_end=busy))
    assert list(row.flags) == ["other-benchmarks-at-end(1)",
                            "cpu-contention(47%-of-host-CPU-used-by-other-processes)"]
    # a load average of the run's own threads is no flag
    own = "CARAML host at end: load=3.9 cpus=2 other_benchmarks=0 foreign_cpu_pct=1.5"
    assert decide(tmp_path / "b", job_out=finished_job(at_end=own)).flags == ()


def test_fewer_iterations_than_planned_are_flagged(tmp_path):
    short = LLM_GLOBAL.replace("iterations_total=100", "iterations_total=40")
    row = decide(tmp_path, job_out=finished_job(global_line=short, stop="signal SIGUSR1"))
    assert list(row.flags) == ["stopped-early(40-of-100-iterations)"]


def test_an_image_row(tmp_path):
    row = decide(tmp_path, "image", job_out=finished_job(global_line=IMAGE_GLOBAL))
    assert row.model == "resnet50" and row.image_size == 224
    assert row.sequence_length is None and row.mfu is None
    assert row.unit == "images" and row.per_s == 1280.0
    assert row.work_per_wh_timed == pytest.approx(23040 / 36.0)


def test_an_operator_row_counts_samples_and_names_its_problem_in_the_model(tmp_path):
    row = decide(tmp_path, "operator", params={"row_benchmark": "operator", "problem": "rbc3d",
                                               "compile_mode": "default"},
                 job_out=finished_job(global_line=OPERATOR_GLOBAL))
    # two problems are never like for like: the problem is part of the model's name
    assert row.model == "FNO rbc3d"
    assert (row.precision, row.global_batch, row.micro_batch,
            row.compile, row.backend) == ("fp32", 16, 4, "default",
                                                                   "neuraloperator")
    assert row.label == "FNO rbc3d fp32 compile default batch 16"
    assert row.unit == "samples" and row.per_s == 320.0
    assert row.per_s_per_device == 80.0 and row.mfu is None
    assert row.work_per_wh_timed == pytest.approx(1440 / 36.0)
    assert row.work_per_wh_run == pytest.approx(1600 / 40.0)


def test_every_benchmarks_configuration_is_the_same_fields_of_the_record():
    configuration = {"model", "precision", "global_batch", "sequence_length", "image_size", "backend", "tp",
                     "pp", "dp", "micro_batch", "params", "compile"}
    assert configuration <= set(FIELDS)
    for entry in benchmarks.all_benchmarks():
        assert set(entry.config({}, {})) == configuration, entry.name


def test_an_unfinished_operator_work_package_is_decided_as_an_operator_row(tmp_path):
    """decide_now (the main command, caraml-compare) takes the benchmark from
    the work package's row_benchmark (there is no default benchmark)."""
    run = run_dir(tmp_path, {"row_benchmark": "operator", "problem": "rbc2d"})
    write(execute(run), job_out=finished_job(global_line=OPERATOR_GLOBAL.replace("rbc3d", "rbc2d")))
    row = decide_now(execute(run))
    assert row.benchmark == "operator" and row.model == "FNO rbc2d"
    assert row.unit == "samples"


def test_graphcores_gpt2_figures_come_from_its_last_step(tmp_path):
    """GC200 (llm_benchmark_ipu.yaml): Tokens/s is the last step's samples/s
    times the sequence length (the first step includes the graph
    compilation); the work is every logged step's global batch."""
    steps = "".join(f"step {i} of epoch 0, loss: 9.1, acc: 0.0, lr: 1e-05, throughput: {v} "
                    "samples/sec\n" for i, v in enumerate([0.5, 59.0, 60.0]))
    job_out = "\n".join([START, "CARAML job: end=2026-11-24T05:10:00+00:00 status=0", ""])
    row = decide(tmp_path, params={"seq_length": "1024", "global_batch_used": "64",
                                   "device_kind": "ipu", "peak_tflops": "GC200"},
                 job_out=job_out, job_err=steps)
    assert state(row) == ("ok", "")
    assert row.per_s == pytest.approx(60.0 * 1024)
    assert row.per_s_per_device == pytest.approx(60.0 * 1024 / 4)
    assert row.global_batch == 64 and row.sequence_length == 1024
    assert row.work_per_wh_run == pytest.approx(3 * 64 * 1024 / 40.0)


def test_the_lines_for_the_tables_keep_jubes_value_rules(tmp_path, capsys):
    row = decide(tmp_path, job_out=finished_job(stop="signal SIGUSR1, then more"))
    jube_lines.print_lines(row)
    out = capsys.readouterr().out.splitlines()
    fields = dict(w.split("=", 1) for w in out[0].removeprefix("CARAML row: ").split())
    assert fields["state"] == "ok-stopped-early" and fields["notable"] == "yes"
    assert fields["energy_scope"] == fields["energy_scope_shown"] == "gpu"
    assert fields["energy_kind"] == "measured"
    assert fields["mfu"] == "0.41" and fields["layout"] == "1x4"
    assert fields["power_w_per_device"] == "324.0"  # watts to one decimal, whole or not
    # a measurement's Status is its state; the cause and the flags each on a line of their own
    assert out[1] == "CARAML row status: ok-stopped-early"
    assert out[2] == "CARAML row reason: signal SIGUSR1; then more"
    assert out[3] == "CARAML row flags: none"
    assert not any("," in line for line in out)


def test_row_json_holds_the_record_field_by_field_and_reads_back_the_same(tmp_path):
    row = decide(tmp_path, job_out=finished_job())
    path = row_json.write(row, tmp_path)
    stored = json.loads(path.read_text())
    assert stored["schema"] == "caraml-row/2"
    assert list(stored) == ["schema", *FIELDS]
    assert isinstance(stored["per_s"], float) and isinstance(stored["global_batch"], int)
    assert row_json.read(path) == row


def test_an_unknown_benchmark_is_refused(tmp_path):
    with pytest.raises(ValueError, match=re.escape("unknown benchmark 'gpt'")):
        decide(tmp_path, "gpt", job_out=finished_job())


def test_every_pattern_of_the_short_tables_reads_a_word_of_the_row_line(tmp_path):
    # the short tables read the row line through platform.xml's rowPatterns
    from tests.jube_runs import ROOT

    patterns = ET.parse(ROOT / "platform.xml").getroot().find("patternset[@name='rowPatterns']")
    patterned = {re.search(r"(?:\\b|: )(\w+)=\(", p.text).group(1)
                 for p in patterns if "row: " in p.text}
    slots = {f"own{i}" for i in range(1, benchmarks.OWN_SLOTS + 1)}
    assert patterned <= {*FIELDS, *render.labels(decide(tmp_path, job_out=finished_job())), *slots}


def test_every_figure_of_the_row_has_a_typed_pattern_of_its_name_without_a_default():
    """JUBE's statistics (_avg, _min, _max, _std) need typed patterns; a
    typed pattern's default "" is no number JUBE can convert, so a figure
    the row lacks leaves its cell empty by matching nothing."""
    from tests.jube_runs import ROOT

    patterns = {p.get("name"): p for p in ET.parse(ROOT / "platform.xml").getroot()
                .find("patternset[@name='rowPatterns']")}
    numbers = {name: {"number": "float", "whole": "int"}[KINDS[name]] for name in FIELDS
               if KINDS[name] in ("number", "whole")}
    assert len(numbers) > 60
    typed = {name[len("row_"):]: p.get("type") for name, p in patterns.items()
             if p.get("type") in ("int", "float")}
    assert typed == numbers
    for name in numbers:
        pattern = patterns[f"row_{name}"]
        assert pattern.text == rf"^CARAML row: .*\b{name}=(\S+)" and pattern.get("default") is None


def test_a_runs_rows_are_the_decided_ones_then_those_the_model_decides_now(tmp_path):
    # one work package decided by its combine step, one whose job has not
    # started yet, and one row.json that cannot be read
    run = run_dir(tmp_path)
    decided = decide(tmp_path / "other", job_out=finished_job())
    combine = run / "000002_combine_energy" / "work"
    combine.mkdir(parents=True)
    row_json.write(dataclasses.replace(decided, work_package="/elsewhere/000009_execute/work"), combine)
    broken = run / "000003_combine_energy" / "work"
    broken.mkdir(parents=True)
    (broken / "row.json").write_text('{"schema": "caraml-row/1", "benchm')
    write(execute(run), stdout="Submitted batch job 7\n")
    rows = rows_of_run(run, slurm_state=lambda job_id: None)
    assert [state(r)[0] for r in rows] == ["ok", "failed", "queued"]
    assert rows[1].reason.startswith(f"{broken / 'row.json'}: not JSON")
    assert rows[2].work_package == str(execute(run).resolve())


def test_a_copied_run_folder_gives_each_work_package_one_row(tmp_path):
    """Its row.json names the work package where it first ran; the copy's
    execute folder is that work package, not one more whose job is still
    to be decided."""
    run = run_dir(tmp_path / "first")
    write(execute(run), job_out=finished_job())
    combine = run / "000002_combine_energy" / "work"
    combine.mkdir(parents=True)
    row_json.write(dataclasses.replace(decide(tmp_path / "d", job_out=finished_job()),
                                       work_package=str(execute(run).resolve())), combine)
    copy = shutil.copytree(run, tmp_path / "copy" / "000000")
    rows = rows_of_run(copy, slurm_state=lambda job_id: None)
    assert [state(r)[0] for r in rows] == ["ok"]


# The same signal gives the same status whichever process of the job got it:
# a rank (which writes its stop line and exits 0) or the job script (which
# writes the signal down, and whose launcher exits non-zero once it passed
# the signal on to the ranks).
LAUNCHER_STOPPED = "job exited with status 1: the launcher got SIGTERM and stopped the ranks\n"


@pytest.mark.parametrize("received", ["SIGTERM", "SIGINT"])
def test_a_signal_to_the_job_script_stops_early_like_one_to_a_rank(tmp_path, received):
    row = decide(tmp_path, job_out=finished_job(stop="signal SIGTERM", status=1),
                 error=LAUNCHER_STOPPED, signal=f"{received}\n")
    assert state(row) == ("ok-stopped-early", f"signal {received}")
    assert row.per_s is not None


def test_a_signal_to_a_rank_is_named_the_same(tmp_path):
    row = decide(tmp_path, job_out=finished_job(stop="signal SIGTERM"))
    assert state(row) == ("ok-stopped-early", "signal SIGTERM")


def test_the_first_signal_that_reached_the_job_script_is_the_reason(tmp_path):
    row = decide(tmp_path, job_out=finished_job(stop="signal SIGTERM", status=1),
                 error=LAUNCHER_STOPPED, signal="SIGINT\nSIGTERM\n")
    assert state(row) == ("ok-stopped-early", "signal SIGINT")


def test_a_signal_before_the_figures_were_written_fails_naming_it(tmp_path):
    ended = "\n".join([START, "CARAML job: end=2026-11-24T05:10:00+00:00 status=1", ""])
    row = decide(tmp_path, job_out=ended, error=LAUNCHER_STOPPED, signal="SIGINT\n")
    assert state(row) == ("failed", "stopped by SIGINT: " + LAUNCHER_STOPPED.strip())
    assert row.per_s is None


def test_a_job_script_still_stopping_after_a_signal_is_running(tmp_path):
    row = decide(tmp_path, jpwr=None, job_out=START + "\n", signal="SIGINT\n")
    assert state(row) == ("running", "")


def test_the_suites_own_error_after_a_signal_still_fails_the_row(tmp_path):
    row = decide(tmp_path, job_out=finished_job(stop="signal SIGTERM", status=1), signal="SIGTERM\n",
                 stderr="CARAML ERROR: the energy directory is not writable\n")
    assert state(row) == ("failed", "stopped by SIGTERM: the energy directory is not writable")


def test_a_failed_row_keeps_the_energy_drawn_and_no_figure_that_means_nothing(tmp_path):
    row = decide(tmp_path, job_out=finished_job(status=1),
                 error="job exited with status 1: rank 1 killed by SIGKILL on cn2\n")
    assert state(row)[0] == "failed"
    assert row.wh_run > 0
    assert row.energy_window == "run" and row.wh_timed is None and row.energy_complete_timed is None
    assert row.work_per_wh_run is None and row.work_per_wh_gpu is None
    fields = render.words(row)
    assert [fields.get(name) for name in ("wh_timed", "work_per_wh_timed", "work_per_wh_run")] == [None] * 3
    assert fields["wh_run"] == "40"


def test_a_signal_after_the_last_iteration_cut_nothing_short(tmp_path):
    row = decide(tmp_path, job_out=finished_job(status=1), error=LAUNCHER_STOPPED,
                 signal="SIGINT\n")
    assert state(row) == ("ok", "")


def test_a_work_package_jube_never_began_is_a_named_row(tmp_path):
    # a `jube run` stopped by Ctrl-C after its first work package: JUBE
    # planned the second (workpackages.xml) and made no folder for it
    run = run_dir(tmp_path)
    write(execute(run), job_out=finished_job())
    tree = ET.parse(run / "workpackages.xml")
    planned = copy.deepcopy(tree.getroot().find("workpackage"))
    planned.set("id", "2")
    tree.getroot().append(planned)
    tree.write(run / "workpackages.xml")
    rows = rows_of_run(run, slurm_state=lambda job_id: None)
    assert [state(r)[0] for r in rows] == ["ok", "queued"]
    # a live run's waiting row is no stopped one: the reason fits both
    assert rows[1].reason == ("not started: JUBE starts it after the ones before it; "
                              "where the run was stopped jube continue goes on")
    assert rows[1].model == "800M"


def test_a_work_package_never_begun_after_a_failed_data_step_names_that_failure(tmp_path):
    run = run_dir(tmp_path, with_data_step=True)
    (run / "000000_prepare_data" / "work" / "stderr").write_text(
        "CARAML ERROR: corpus file /x.txt does not exist\n")
    shutil.rmtree(run / "000001_execute")
    [row] = rows_of_run(run, slurm_state=lambda job_id: None)
    assert state(row) == ("failed", "corpus file /x.txt does not exist")


@pytest.mark.parametrize("benchmark, line", [("llm", LLM_GLOBAL), ("image", IMAGE_GLOBAL),
                                             ("operator", OPERATOR_GLOBAL)])
def test_the_driver_cores_figures_reach_the_tables_through_the_row_line(tmp_path, benchmark, line):
    """Iterations, time per iteration and peak memory: one line of the
    driver core for every benchmark, read by the row model alone."""
    memory = " memory_max_allocated_gib=1.5 memory_max_reserved_gib=2.25 memory_device_gib=40"
    row = decide(tmp_path, benchmark, job_out=finished_job(global_line=line + memory))
    fields = render.words(row)
    assert (fields["timed_iterations"], fields["memory_max_allocated_gib"],
            fields["memory_max_reserved_gib"], fields["memory_device_gib"]) == ("90", "1.5", "2.25", "40")
    assert float(fields["time_per_iteration_s"]) == float(last_kv(line, "global")["time_per_iteration_s"])


def test_an_mfu_the_driver_refused_is_no_figure_and_says_why(tmp_path):
    refused = LLM_GLOBAL.replace(
        "mfu=0.410256 peak_tflops=312 peak_basis=datasheet peak_key=A100",
        "mfu=nan peak_tflops=0.0014 peak_basis=measured-matmul peak_key=- peak_windows=5 "
        "peak_min_tflops=0.001 peak_median_tflops=0.0012 peak_spread_pct=28.6 "
        "mfu_unavailable=measured-matmul-rate-0.0014-TFLOP/s-is-below-the-model's-own-"
        "0.05-TFLOP/s-per-device")
    row = decide(tmp_path, job_out=finished_job(global_line=refused))
    assert row.mfu is None and row.state == "ok"
    # the rates stand: only the fraction of a peak is refused
    global_line = last_kv(refused, "global")
    assert (row.model_tflops_per_device, row.hardware_tflops_per_device) == (
        float(global_line["model_tflops_per_device"]), float(global_line["tflops_per_device"]))
    assert row.model_tflops_per_device > 0
    assert "mfu-not-available(measured-matmul-rate-0.0014-TFLOP/s-is-below-the-model's-own-" \
           "0.05-TFLOP/s-per-device)" in list(row.flags)


def test_a_rate_measured_on_a_busy_host_is_no_mfu_but_a_datasheet_peak_is(tmp_path):
    """A load that holds every matmul window down alike (0.070 against 0.2
    TFLOP/s on the shared development host) passes the driver's floors; the
    contention the run saw refuses such a measured peak."""
    measured = LLM_GLOBAL.replace(
        "peak_tflops=312 peak_basis=datasheet peak_key=A100",
        "peak_tflops=0.0696 peak_basis=measured-matmul peak_key=- peak_windows=10 peak_min_tflops=0.034 "
        "peak_median_tflops=0.052 peak_spread_pct=51.4 mfu_unavailable=-")
    busy = "CARAML host at end: load=9.2 cpus=2 other_benchmarks=4 foreign_cpu_pct=77.7"
    row = decide(tmp_path / "a", job_out=finished_job(global_line=measured, at_end=busy))
    assert row.mfu is None
    assert "mfu-not-available(matmul-rate-measured-on-a-host-whose-CPU-other-processes-used-" \
           "78%)" in list(row.flags)
    quiet = "CARAML host at end: load=1.2 cpus=2 other_benchmarks=0 foreign_cpu_pct=2.0"
    row = decide(tmp_path / "b", job_out=finished_job(global_line=measured, at_end=quiet))
    assert row.peak_tflops == 0.0696 and list(row.flags) == []
    # the datasheet's peak does not depend on the host's load
    row = decide(tmp_path / "c", job_out=finished_job(at_end=busy))
    assert row.mfu == pytest.approx(0.410256)
    assert not any(f.startswith("mfu-not-available") for f in list(row.flags))


_LIMIT_LINES = ("CARAML power limit: rank=0 device=gpu0 scope=module asked=0.75 asked_w=300 "
                "before_w=400 reported_w=300\n"
                "CARAML power limit restored: rank=0 device=gpu0 restored=yes limit_w=400\n")


def test_a_sweep_points_row_has_its_limit_everywhere(tmp_path, capsys):
    row = decide(tmp_path, params={"power_limit": "0.75", "power_limit_scope_run": "module"},
                 job_out=_LIMIT_LINES + finished_job())
    assert state(row) == ("ok", "") and list(row.flags) == []
    assert (row.power_limit, row.power_limit_asked_w, row.power_limit_scope, row.power_limit_mode,
            row.power_limit_before_w, row.power_limit_w, row.power_limit_restored,
            row.power_limit_restored_by) == ("0.75", 300.0, "module", "suite", 400.0, 300.0, True, "ranks")
    assert row.power_w_per_device_timed > 0
    columns = render.history_values(row)
    assert (columns["power_limit_asked_w"], columns["power_limit_w"]) == (300.0, 300.0)
    jube_lines.print_lines(row)
    fields = dict(w.split("=", 1) for w in capsys.readouterr().out.splitlines()[0].split()[2:])
    assert (fields["power_limit"], fields["power_limit_w"], fields["power_limit_scope"]) == \
        ("0.75", "300", "module")


def test_a_row_without_a_sweep_has_no_limit_and_one_whose_limit_stayed_is_flagged(tmp_path):
    plain = decide(tmp_path / "plain", job_out=finished_job())
    assert plain.power_limit is None and plain.power_limit_w is None
    left = decide(tmp_path / "left", params={"power_limit": "0.75"},
                  job_out=_LIMIT_LINES.replace("restored=yes", "restored=no") + finished_job())
    assert left.power_limit_restored is False
    assert "power-limit-not-restored" in list(left.flags)
