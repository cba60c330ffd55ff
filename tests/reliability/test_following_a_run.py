"""The main command follows its runs and always ends: a Slurm job that
cannot start (the test cluster's only node set down) ends the wait with
status 1, the job's Slurm state named and kept for its row; each job says
when it starts and ends and how to follow it; a tag of one benchmark (a
model size, a problem) does not make another refuse its run."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from caraml import jube_run
from caraml.login import follow
from caraml.login.benchmark_tags import for_script, main
from tests.caraml import row_packages
from tests.checkouts import RUNNABLE, SMOKE_JOBS, checkout_with_venv, commands_ran, main_command
from tests.jube_runs import ROOT

IMAGE = ROOT / "image_classification/image_classification_torch_benchmark.xml"
LLM = ROOT / "llm_training/llm_benchmark_nvidia_amd.yaml"
OPERATOR = ROOT / "operator_benchmark/fno_benchmark.xml"


def test_a_model_size_goes_to_the_llm_benchmark_only():
    assert for_script(IMAGE, [LLM, OPERATOR], ["A100", "800M", "smoke"]) == ["A100", "smoke"]
    assert for_script(LLM, [IMAGE, OPERATOR], ["A100", "800M", "smoke"]) == ["A100", "800M", "smoke"]
    assert for_script(OPERATOR, [IMAGE, LLM], ["A100", "800M", "smoke"]) == ["A100", "smoke"]


def test_a_problem_and_a_compile_mode_go_to_the_operator_benchmark_only():
    tags = ["A100", "rbc3d", "navier_stokes2d", "autotune", "precision"]
    assert for_script(OPERATOR, [IMAGE, LLM], tags) == tags
    assert for_script(IMAGE, [LLM, OPERATOR], tags) == ["A100", "precision"]
    assert for_script(LLM, [IMAGE, OPERATOR], tags) == ["A100"]


def test_the_command_line_prints_the_tags_one_a_line(capsys):
    assert main([str(IMAGE), "--other", str(LLM), "CPU", "800M", "smoke"]) == 0
    assert capsys.readouterr().out == "CPU\nsmoke\n"


def test_a_tag_no_benchmark_knows_is_kept_for_the_preflight_to_name():
    assert for_script(IMAGE, [LLM], ["CPU", "A200"]) == ["CPU", "A200"]


@pytest.mark.parametrize("reason, others_running, stuck", [
    ("ReqNodeNotAvail, UnavailableNodes:localhost", False, True),
    ("Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions",
     True, True),
    ("PartitionDown", True, True),
    ("DependencyNeverSatisfied", True, True),
    ("AssocMaxWallDurationPerJobLimit", True, True),
    ("AssocMaxJobsLimit", False, True),   # none of the run's jobs will free a slot
    ("AssocMaxJobsLimit", True, False),   # one of them will
    ("Resources", False, False),
    ("Priority", False, False),
])
def test_pending_reasons_that_waiting_does_not_cure(reason, others_running, stuck):
    assert follow.cannot_start(reason, others_running) is stuck


def test_a_work_package_is_named_by_its_system_and_what_differs_from_its_siblings(tmp_path):
    (tmp_path / "workpackages.xml").write_text("""<workpackages>
  <workpackage id="0"><step>execute</step><parameterset>
    <parameter name="system_name" mode="text"><value>CPU</value></parameter>
    <parameter name="model" separator="," mode="text"><value>resnet50,resnet152</value>
      <selection>resnet50</selection></parameter>
    <parameter name="per_device" mode="python"><value>${model}_x</value>
      <selection>resnet50_x</selection></parameter>
  </parameterset></workpackage>
  <workpackage id="1"><step>execute</step><parameterset>
    <parameter name="system_name" mode="text"><value>CPU</value></parameter>
    <parameter name="model" separator="," mode="text"><value>resnet50,resnet152</value>
      <selection>resnet152</selection></parameter>
    <parameter name="per_device" mode="python"><value>${model}_x</value>
      <selection>resnet152_x</selection></parameter>
  </parameterset></workpackage>
  <workpackage id="2"><step>combine_energy</step><parameterset>
    <parameter name="system_name" mode="text"><value>CPU</value></parameter>
  </parameterset></workpackage>
</workpackages>""")
    # the combine step's package, which lacks the model, tells no job from another
    assert follow.varying_parameters(tmp_path) == {"000000_execute": "CPU model=resnet50",
                                                  "000001_execute": "CPU model=resnet152",
                                                  "000002_combine_energy": "CPU"}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    return checkout_with_venv(tmp_path_factory.mktemp("follow") / RUNNABLE / "caraml")


@pytest.mark.jube
def test_a_model_size_tag_does_not_fail_the_image_rows(checkout):
    proc = main_command(checkout, "CPU", "800M", "dryrun")
    out = proc.stdout + proc.stderr
    assert "unknown tag 800M" not in out, out[-4000:]
    image = sorted((checkout / "image_classification/image_classification_benchmark_run")
                   .glob("*/result/result_csv.dat"))[-1].read_text()
    assert ",dry-run," in image and ",failed," not in image, image


@pytest.mark.jube
@pytest.mark.slurm
def test_each_job_says_when_it_starts_and_ends_and_how_to_follow_it(main_command_through_slurm):
    out = main_command_through_slurm.out
    assert main_command_through_slurm.done.returncode == 0, out[-4000:]
    started = [ln for ln in out.splitlines() if " started: follow it with tail -f " in ln]
    # a job's end as the row model decides it, with its throughput
    ended = [ln for ln in out.splitlines() if re.search(r"_execute \[.*\] ok, [0-9.]+ \w+/s$", ln)]
    assert len(started) == len(ended) >= 2, out[-4000:]
    assert any("images/s" in ln for ln in ended) and any("tokens/s" in ln for ln in ended)
    # the printed path is the job's output file, quoted for the shell
    path = started[0].split("tail -f ", 1)[1]
    assert Path(subprocess.run(["bash", "-c", f"printf %s {path}"], capture_output=True,
                               text=True).stdout).is_file()


@pytest.mark.jube
@pytest.mark.slurm
def test_through_slurm_the_command_waits_for_the_jobs_and_ends(main_command_through_slurm):
    out = main_command_through_slurm.out
    assert main_command_through_slurm.done.returncode == 0, out[-4000:]
    # each benchmark's own end-to-end test reads its rows
    for benchmark, jobs in SMOKE_JOBS.items():
        table = main_command_through_slurm.run_of(benchmark).csv()
        assert list(table["Status"]) == ["ok"] * jobs, table.to_dict("records")
    assert not commands_ran(main_command_through_slurm.checkout.parents[1])


@pytest.mark.jube
@pytest.mark.slurm
def test_a_job_whose_node_is_down_ends_the_command_with_its_reason(checkout, slurm):
    node = ["scontrol", "update", "NodeName=localhost"]
    subprocess.run([*node, "State=DOWN", "Reason=maintenance"], env=slurm.env, check=True)
    try:
        proc = main_command(checkout, "CPU", "smoke", "slurm",
                             env={**slurm.env, "CARAML_PACE_S": "5"})
        queued = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=slurm.env, text=True,
                                capture_output=True).stdout.split("\n")
    finally:
        ids = subprocess.run(["squeue", "-h", "-o", "%i"], env=slurm.env, text=True,
                             capture_output=True).stdout.split()
        if ids:
            subprocess.run(["scancel", *ids], env=slurm.env, check=False)
        subprocess.run([*node, "State=RESUME"], env=slurm.env, check=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    said = [ln for ln in out.splitlines() if "cannot start as things stand" in ln]
    # every benchmark's jobs were submitted, and each was left queued, as said
    jobs = sum(SMOKE_JOBS.values())
    assert len(said) == jobs and all("It stays queued" in ln and "scancel" in ln for ln in said), out[-4000:]
    assert sum(" PENDING" in q for q in queued) == jobs, queued
    states = [p.read_text() for p in checkout.glob("*/*_run/*/*/work/slurm_state")]
    # Slurm words a down node either way, depending on when it looked
    down = ("state=PENDING reason=ReqNodeNotAvail", "state=PENDING reason=Nodes_required_for_job_are_DOWN")
    assert len(states) == jobs and all(s.startswith(down) and " " not in s.split("reason=")[1].strip()
                                    for s in states), states


def test_a_running_job_is_followed_from_its_start_to_its_end(tmp_path):
    handle = tmp_path / "run"
    out = io.StringIO()
    now = [0.0]
    follower = follow.Follower(handle, pace_s=60, out=out, clock=lambda: now[0])
    work = row_packages.execute(row_packages.run_dir(handle, {"row_benchmark": "image"}))
    (work / "job.sh").write_text("")
    follower.look()  # its jube run has not named its run yet: nothing said
    follower.heard("# id: 0\n")
    follower.look()
    job_out = work / "job.out"
    job_out.write_text("CARAML job: start=2026-01-01T00:00:00 host=n1 job_id=none\n"
                       "iteration 2/10: loss 7.1, 0.5 s per iteration, 64.0 images/s\n")
    follower.look()
    follower.look()  # nothing new: nothing said
    with job_out.open("a") as f:
        f.write("iteration 3/10: loss 7.0, 0.5 s per iteration, 64.1 images/s\n")
    now[0] = 30.0
    follower.look()  # new progress within the pace: not said yet
    with job_out.open("a") as f:
        f.write("iteration 4/10: loss 6.9, 0.5 s per iteration, 64.2 images/s\n"
                "CARAML global: images_per_s_mean=64.1 images_per_s_median=64.0\n")
    now[0] = 61.0
    follower.look()
    (work / "error").write_text("job exited with status 143 (SIGTERM)\n")
    (work / "ready").touch()
    follower.look()
    follower.look()
    lines = out.getvalue().splitlines()
    assert lines == [
        f"CARAML: 000001_execute [A100] started: follow it with tail -f {job_out}",
        "CARAML: 000001_execute iteration 2/10: loss 7.1, 0.5 s per iteration, 64.0 images/s",
        "CARAML: 000001_execute iteration 4/10: loss 6.9, 0.5 s per iteration, 64.2 images/s",
        "CARAML: 000001_execute [A100] failed (job exited with status 143 (SIGTERM)), no throughput",
    ], lines



def test_a_job_that_ends_while_jube_rewrites_its_record_is_said_once_the_record_reads(tmp_path):
    """JUBE rewrites workpackages.xml in place as it goes: a look while
    `jube run` runs found half of it, and the main command said the job
    failed though its row was ok."""
    handle = tmp_path / "run"
    out = io.StringIO()
    follower = follow.Follower(handle, pace_s=60, out=out)
    run = row_packages.run_dir(handle, {"row_benchmark": "image"})
    work = row_packages.execute(run)
    (work / "job.sh").write_text("")
    follower.heard("# id: 0\n")
    (work / "job.out").write_text("CARAML job: start=2026-01-01T00:00:00 host=n1 job_id=none\n"
                                  "CARAML global: images_per_s_mean=64.1 images_per_s_median=64.0\n"
                                  "CARAML job: end=2026-01-01T00:01:00 status=0\n")
    (work / "ready").touch()
    record = run / jube_run.RECORD
    whole = record.read_text()
    record.write_text(whole[: len(whole) // 2])  # JUBE half way through writing it
    follower.look(settled=False)
    assert " ended" not in out.getvalue() and "failed" not in out.getvalue(), out.getvalue()
    record.write_text(whole)
    follower.look(settled=False)
    ends = [ln for ln in out.getvalue().splitlines() if "images/s" in ln and "started" not in ln]
    assert ends == ["CARAML: 000001_execute [A100] ok, 64.1 images/s"], out.getvalue()
    # once JUBE has ended, a record that still does not read is said as the failed row it is
    record.write_text(whole[: len(whole) // 2])
    late = io.StringIO()
    follower = follow.Follower(handle, pace_s=60, out=late)
    follower.heard("# id: 0\n")
    follower.look()
    assert "000001_execute failed (the row model could not decide this row (ParseError" in late.getvalue(), \
        late.getvalue()

def test_only_the_run_its_own_jube_run_names_is_followed(tmp_path):
    """Two main commands in one clone: A's follower once took B's newer run
    for its own and printed B's figures."""
    handle = tmp_path / "run"
    out = io.StringIO()
    follower = follow.Follower(handle, pace_s=60, out=out)
    for run_id in (0, 1):  # 000001 is another command's, newer
        run = handle / f"{run_id:06d}"
        work = run / "000000_execute" / "work"
        work.mkdir(parents=True)
        (work / "job.sh").write_text("")
        (work / "job.out").write_text(f"CARAML job: start=2026-01-01T00:00:0{run_id} host=n{run_id}\n")
    for line in ("######################################################################\n",
                 "# benchmark: image_classification\n", "# id: 0\n", "# id: 1\n"):
        follower.heard(line)
    follower.look()
    assert follower.run_dir == handle / "000000"
    said = out.getvalue()
    assert f"tail -f {handle}/000000/000000_execute/work/job.out" in said and "000001" not in said


@pytest.mark.jube
def test_the_follower_hears_the_run_id_from_the_real_jube_run(tmp_path):
    """JUBE's banner, unbuffered, names the run before its steps run; a
    newer run folder of another command beside it changes nothing."""
    handle = tmp_path / "run"
    (handle / "000005").mkdir(parents=True)  # another command's, made while this one starts
    run_file = tmp_path / "run_id"
    # (the follower takes the script folder's turn to parse, as other workers' runs do)
    status = follow.follow(handle, ["jube", "run", str(IMAGE), "--hide-animation", "-o",
                                    str(handle), "--tag", "CPU", "dryrun"],
                           pace_s=60, poll_s=1, run_file=run_file)
    assert status == 0
    assert run_file.read_text() == "6\n" and (handle / "000006" / "workpackages.xml").is_file()


def test_queued_jobs_show_their_state_and_reason_while_the_command_waits(tmp_path):
    out = io.StringIO()
    follower = follow.Follower(tmp_path / "run", pace_s=1e9, out=out)
    for n, job in ((0, "41"), (1, "42")):
        wp = follow.Package(tmp_path / f"00000{n}_execute" / "work", config=f"batch={n}")
        wp.job_id = job
        follower.packages[wp.name] = wp
    waiting = {"41": ("PENDING", "Priority"), "42": ("PENDING", "Resources")}
    assert follower.blocked(waiting) == []
    assert follower.blocked(waiting) == []  # unchanged: said once a pace
    stuck = follower.blocked({"41": ("RUNNING", "None"),
                              "42": ("PENDING", "PartitionTimeLimit")})
    assert [wp.job_id for wp in stuck] == ["42"]
    assert out.getvalue().splitlines() == [
        "CARAML: 000000_execute Slurm job 41: PENDING (Priority)",
        "CARAML: 000001_execute Slurm job 42: PENDING (Resources)",
        "CARAML: 000000_execute Slurm job 41: RUNNING",
    ]


def test_ctrl_c_says_where_the_run_is_and_stops_the_calling_shell_too(tmp_path):
    started = tmp_path / "started"
    proc = subprocess.Popen(
        [sys.executable, "-m", "caraml.login.follow", str(tmp_path / "run"), "--",
         # a stand-in for `jube run SCRIPT`
         "sh", "-c", 'touch "$0"; exec sleep 60', str(started), "run", str(tmp_path / "bench.xml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        # as in a terminal's foreground: SIGINT at its default, also where
        # this test runs from a background job, which ignores it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the command never started"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGINT, err
    assert "CARAML: interrupted; what ran is in" in err and "Traceback" not in err


def test_the_follower_takes_a_jube_run_command_only(tmp_path, capsys):
    with pytest.raises(SystemExit) as ended:
        follow.main([str(tmp_path / "run"), "--", "sleep", "1"])
    assert ended.value.code == 2
    assert "give the command after --: jube run SCRIPT ..." in capsys.readouterr().err


def _followed(tmp_path: Path, *options: str, env: dict[str, str] | None = None) -> list[str]:
    """The follower's output at a level, over a stand-in for `jube run` that
    prints JUBE's banner and a line of its own, and a run whose job has
    started (`jube continue` and `jube status` then find no JUBE run there)."""
    handle = tmp_path / "run"
    work = row_packages.execute(row_packages.run_dir(handle, {"row_benchmark": "image"}))
    (work / "job.sh").write_text("")
    (work / "job.out").write_text("CARAML job: start=2026-01-01T00:00:00 host=n1 job_id=none\n")
    done = subprocess.run(
        [sys.executable, "-m", "caraml.login.follow", *options, "--poll", "0.1", str(handle), "--",
         "sh", "-c", 'echo "# id: 0"; echo "a line of jube run"', "run", str(tmp_path / "bench.xml")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if k != "CARAML_LOG_LEVEL"}, **(env or {})})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_quiet_leaves_the_chatter_out_and_verbose_adds_what_it_asked_jube(tmp_path):
    default = _followed(tmp_path / "default")
    assert "a line of jube run" in default
    assert any(line.startswith("CARAML: 000001_execute [A100] started") for line in default)
    assert not any(line.startswith("CARAML: jube ") for line in default)
    assert _followed(tmp_path / "quiet", "-q") == []
    assert _followed(tmp_path / "env", env={"CARAML_LOG_LEVEL": "WARNING"}) == []
    verbose = _followed(tmp_path / "verbose", "-v")
    assert set(default) <= {line.replace(str(tmp_path / "verbose"), str(tmp_path / "default"))
                            for line in verbose}
    assert any(re.match(r"CARAML: jube continue \S+ -i 0 --hide-animation: status \d+", line)
               for line in verbose), verbose
    assert any(re.match(r"CARAML: jube status \S+ -i 0: status \d+", line) for line in verbose), verbose
