"""The README's main command (aux/run_benchmarks.sh) run as a user runs it,
from a copy of this checkout whose path hides commands (tests/checkouts.py
RUNNABLE: spaces, quotes, `;`, `&`, `|`, `*`, `#`, parentheses): it always
ends, its exit status says whether a row failed, no part of the path ever
runs as a command, and the LLM and operator jobs run from the copy with
their rows ok."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from caraml import benchmarks
from tests.checkouts import (
    RUNNABLE,
    SMOKE_JOBS,
    TEST_POLL,
    MainCommand,
    check_ran_from_the_copy,
    checkout_with_venv,
    commands_ran,
    copy_tree,
    main_command,
)

pytestmark = pytest.mark.jube


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A copy of this checkout under a RUNNABLE path, with an environment."""
    return checkout_with_venv(tmp_path_factory.mktemp("checkout") / RUNNABLE / "caraml")


def _injected(checkout: Path) -> list[Path]:
    return commands_ran(checkout.parents[1])


def test_a_failed_row_ends_the_command_with_status_1_and_the_next_benchmark_still_runs(checkout):
    # the LLM's corpus goes to a path as hostile as the checkout's
    data = checkout.parent / "data (x);'y'"
    proc = main_command(checkout, "CPU", "smoke",
                         env={"CARAML_IMAGE_DATA": str(checkout / "no such images"),
                              "CARAML_LLM_DATA": str(data)})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    # the image row names the missing path; the LLM and operator benchmarks ran after it
    assert "failed" in out and "no such images does not exist" in out, out[-4000:]
    ran = MainCommand(checkout, proc)
    [llm] = ran.run_of("llm").csv().to_dict("records")
    assert (llm["ModelSize"], llm["Backend"], llm["Status"]) == ("cpu-small", "torch", "ok"), llm
    assert llm["Tokens/s"] > 0 and llm["Energy(Wh)"] > 0 and llm["Data"].startswith("local-pydoc")
    # the corpus went where CARAML_LLM_DATA says, not into the checkout
    assert any(data.rglob("*.idx")) and not (checkout / "llm_training" / "llm_data").exists()
    fno = ran.run_of("operator").csv()
    assert sorted(fno["Problem"]) == ["rbc2d-small", "rbc3d-small"], out[-4000:]
    assert list(fno["Status"]) == ["ok", "ok"] and (fno["Samples/s"] > 0).all(), out[-4000:]
    for benchmark in ("llm", "operator"):
        check_ran_from_the_copy(ran.run_of(benchmark), checkout)
    # the jobs that ran here said how they ended, with their throughput
    # (and through Slurm: tests/reliability/test_following_a_run.py)
    assert re.search(r"_execute \[.*\] ok, \S+ tokens/s$", out, re.MULTILINE), \
        "\n".join(ln for ln in out.splitlines() if "_execute" in ln)
    assert not _injected(checkout)


def test_the_readme_flow_measures_one_row_of_each_benchmark_and_caraml_compare_reads_the_verdict(checkout):
    """The README's main command as written (no tag: LOCAL and measure),
    its window shortened to 3 s (CARAML_MEASURE_S, the documented setting),
    then the README's caraml-compare over its three runs: each benchmark
    has a row that ran the window, and caraml-compare names each benchmark
    none of whose rows timed the verdict's 60 s (exit 1), as its rows say;
    the README's figures of a full run: docs/results.md."""
    proc = main_command(checkout, env={"CARAML_MEASURE_S": "3"})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    ran = MainCommand(checkout, proc)
    unmeasured = []
    for entry in benchmarks.BUILT_IN:
        table = ran.run_of(entry.name).csv()
        assert (table["Status"] == "ok").all(), table.to_string()
        # the window's row: 20 timed iterations or more, for 3 s or more
        windowed = table[table["Iterations"] >= 20]
        assert len(windowed) >= 1, table.to_string()
        assert (windowed["Iterations"] * windowed["Time/iteration(s)"] >= 3).all()
        # a row is a measurement where its timed iterations lasted the verdict's 60 s: on a fast host
        # none does in a 3 s window, on a slow or busy one a row may; the table says which
        verdicts = table["Error"].fillna("")
        if verdicts.str.startswith("not a measurement (").all():
            unmeasured.append(entry.name)
    # the README's caraml-compare: its entry point's module, in the checkout's environment (a view of the
    # suite's, which has no scripts of its own)
    done = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-m", "caraml.compare.cli",
                           *(entry.outpath for entry in benchmarks.BUILT_IN), "--out", "comparison"],
                          cwd=checkout, capture_output=True, text=True, timeout=600)
    assert done.returncode == (1 if unmeasured else 0), done.stdout + done.stderr
    for entry in benchmarks.BUILT_IN:
        failed = f"failed benchmark: LOCAL {entry.name}: no measured row" in done.stdout
        assert failed == (entry.name in unmeasured), done.stdout
    if unmeasured:
        assert "timed iterations in " in done.stdout and "a measurement needs 20 and 60 s" in done.stdout
    assert not _injected(checkout)


def test_a_dry_run_ends_with_status_0(checkout):
    proc = main_command(checkout, "CPU", "dryrun")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert out.count("dry-run") >= 2
    # the third benchmark ran too: dry-run rows of its two default problems
    assert "== jube run operator_benchmark/fno_benchmark.xml --tag CPU dryrun" in out
    fno = sorted((checkout / "operator_benchmark" / "operator_benchmark_run").glob("*/result/result_csv.dat"))
    assert fno[-1].read_text().count(",dry-run,") == 2, out[-4000:]
    assert not _injected(checkout)


def test_a_refused_run_ends_with_status_1(checkout):
    proc = main_command(checkout, "CPU", "smoke", "A200")
    assert proc.returncode == 1
    assert "unknown tag A200" in proc.stdout + proc.stderr


def test_quiet_shows_the_tables_and_errors_alone_and_verbose_what_it_ran(checkout):
    """-q for a batch log: no set-up, no JUBE output, no job lines, the
    tables and the refusal still there; -v: each command and what the
    follower asked JUBE besides what the default level says."""
    default, quiet, verbose = (main_command(checkout, *level, "CPU", "smoke", "A200")
                               for level in ((), ("-q",), ("-v",)))
    for proc in (default, quiet, verbose):
        assert proc.returncode == 1
        assert "unknown tag A200" in proc.stdout and "issues:" in proc.stdout
    # JUBE's banner (its run's id), the run's line, the follower's lines
    chatter = ("== jube run ", "[caraml setup]", "CARAML: ", "#")
    assert "== jube run " in default.stdout and re.search(r"^# *id: *\d+", default.stdout, re.MULTILINE)
    assert not [line for line in quiet.stdout.splitlines() if line.startswith(chatter)], quiet.stdout
    assert "+ jube result " not in default.stdout and "CARAML: jube continue " not in default.stdout
    assert "== jube run " in verbose.stdout and "+ jube result " in verbose.stdout
    asked = re.search(r"^CARAML: jube status .* -i \d+: status 0", verbose.stdout, re.MULTILINE)
    assert asked, verbose.stdout


def test_a_log_level_that_is_none_is_named_before_anything_runs(tmp_path):
    done = subprocess.run(["bash", "aux/run_benchmarks.sh", "CPU", "dryrun"], cwd=Path(__file__).parents[2],
                          env={**os.environ, "CARAML_LOG_LEVEL": "loud"}, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("CARAML ERROR: CARAML_LOG_LEVEL=loud is no log level: give one of DEBUG INFO "
                           "WARNING ERROR (or -q, -v)\n")


@pytest.mark.slurm
def test_a_table_looked_at_during_a_slurm_run_is_fresh_without_dash_a(image_slurm_smoke):
    """JUBE 2.5.1 keeps a run's first analysis: a look at the table while the
    job waits must not leave `jube result` showing "queued" after the job."""
    _, while_queued, after = image_slurm_smoke
    assert while_queued.iloc[0]["Status"] == "queued"
    # the README's commands after the job: continue, then result, no -a
    row = after.iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert row["Energy(Wh)"] > 0


@pytest.mark.slurm
def test_a_slurm_job_that_leaves_the_queue_unrun_ends_the_command(checkout, slurm):
    """scancel before the job starts: no job script runs, no marker ever comes."""
    env = {**os.environ, **slurm.env, **TEST_POLL}
    with slurm.queue_held():  # no job can start: each is cancelled while it waits
        proc = subprocess.Popen(["bash", str(checkout / "aux" / "run_benchmarks.sh"), "CPU", "smoke",
                                 "slurm"], cwd=checkout, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            # the command's own wait ends once its jobs left the queue; the
            # deadline only bounds a command that would wait for ever
            deadline = time.monotonic() + 600
            while proc.poll() is None and time.monotonic() < deadline:
                queued = subprocess.run(["squeue", "-h", "-o", "%i"], env=slurm.env, text=True,
                                        capture_output=True).stdout.split()
                if queued:
                    subprocess.run(["scancel", *queued], env=slurm.env, check=False)
                time.sleep(1)
            assert proc.poll() is not None, "the main command still waits 10 minutes after its jobs left"
            out = proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 1, out[-4000:]
    # each job's row is named as never run
    rows = [line for line in out.splitlines() if line.startswith("CARAML: row ")]
    assert len(rows) == sum(SMOKE_JOBS.values()) and all(r.endswith(": queued") for r in rows), out[-4000:]


@pytest.mark.parametrize("script", ["image_classification/image_classification_torch_benchmark.xml",
                                    "llm_training/llm_benchmark_nvidia_amd.yaml"])
def test_a_checkout_without_its_environment_says_to_run_setup(tmp_path, script):
    """A fresh clone where aux/setup.sh never ran: the row says what to do."""
    bare = copy_tree(tmp_path / "clone")
    out = tmp_path / "run"
    subprocess.run(["jube", "run", script, "--hide-animation", "-o", str(out), "--tag", "CPU", "smoke"],
                   cwd=bare, check=True, capture_output=True, timeout=600)
    subprocess.run(["jube", "result", str(out), "-i", "last"], cwd=bare, check=True, capture_output=True)
    table = next(out.glob("*/result/result_csv.dat")).read_text()
    assert ",failed," in table and "run bash aux/setup.sh" in table, table
    assert f"{bare}/.venv/bin/python not found" in table
