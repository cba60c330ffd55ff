"""Checkouts under hostile names, through the real JUBE. A name JUBE itself
can run (quotes, `;`, `&`, `|`, `*`, `#`, parentheses, spaces) runs every
benchmark with every command of the suite taking it as it is: no command
hidden in it runs and the rows are right. A name JUBE would run commands
from (`"`, `$`, a backtick, a backslash) is refused before JUBE starts, with
one line that names the character."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.checkouts import copy_tree
from tests.jube_runs import ROOT

pytestmark = pytest.mark.jube

# Every character here that a shell or Python would act on runs a command
# (touch PWNED...) if the name reached their source unquoted.
RUNNABLE = ("it's ;touch PWNED1;(x) & touch PWNED2 | y * #h "
            "'+str(__import__('os').system('touch PWNED3'))+'")
REFUSED = {'"': 'a"; touch PWNED4; "b', "$": "a$(touch PWNED5)b", "`": "a`touch PWNED6`b",
           "\\": "a\\b"}


@pytest.fixture
def hostile_checkout(tmp_path):
    checkout = copy_tree(tmp_path / RUNNABLE / "caraml")
    # the environment lives elsewhere: CARAML_VENV names it
    env = {**os.environ, "CARAML_VENV": str(ROOT / ".venv")}
    env.pop("CARAML_ROOT", None)
    yield checkout, env
    assert not list(tmp_path.rglob("PWNED*")), "a command hidden in the path ran"


def jube(checkout: Path, env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(["jube", *args, "--hide-animation"] if args[0] == "run" else
                          ["jube", *args], cwd=checkout, env=env, text=True,
                          capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def run_table(checkout: Path, env: dict[str, str], script: str, outpath: str,
              *tags: str) -> tuple[pd.DataFrame, Path]:
    jube(checkout, env, "run", script, "--tag", *tags)
    jube(checkout, env, "continue", outpath, "-i", "last")
    assert jube(checkout, env, "status", outpath, "-i", "last").strip() == "FINISHED"
    jube(checkout, env, "result", outpath, "-i", "last")
    run_dir = sorted(p for p in (checkout / outpath).iterdir() if p.is_dir())[-1]
    table = pd.read_csv(run_dir / "result" / "result_csv.dat", keep_default_na=False,
                        na_values=[""])
    return table, run_dir


def check_ran_from_the_copy(run_dir: Path, checkout: Path) -> None:
    [work] = run_dir.glob("*_execute/work")
    assert f"CARAML_ROOT={checkout}" not in (work / "job.sh").read_text()  # quoted, not raw
    assert "CARAML job: end=" in (work / "job.out").read_text()
    [combine] = run_dir.glob("*_combine_energy/work")
    assert "jpwr-summary:" in (combine / "jpwr.out").read_text()
    assert "CARAML row: state=ok " in (combine / "stdout").read_text()


def test_image_classification_runs_from_a_hostile_checkout(hostile_checkout):
    checkout, env = hostile_checkout
    table, run_dir = run_table(checkout, env, "image_classification/"
                               "image_classification_torch_benchmark.xml",
                               "image_classification/image_classification_benchmark_run",
                               "CPU", "smoke")
    assert len(table) == 1
    row = table.iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert row["Images/s"] > 0 and row["Energy(Wh)"] > 0
    check_ran_from_the_copy(run_dir, checkout)


def test_llm_prepares_its_data_and_runs_from_a_hostile_checkout(hostile_checkout):
    checkout, env = hostile_checkout
    data = checkout.parent / "data (x);'y'"
    env = {**env, "CARAML_LLM_DATA": str(data)}
    table, run_dir = run_table(checkout, env, "llm_training/llm_benchmark_nvidia_amd.yaml",
                               "llm_training/llm_benchmark_nvidia_amd_run", "CPU", "smoke")
    assert len(table) == 1
    row = table.iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert row["Tokens/s"] > 0 and row["Energy(Wh)"] > 0
    assert row["Data"].startswith("local-pydoc")
    # the corpus went where CARAML_LLM_DATA says, not into the checkout
    assert any(data.rglob("*.idx")) and not (checkout / "llm_training" / "llm_data").exists()
    check_ran_from_the_copy(run_dir, checkout)


def test_the_operator_benchmark_runs_from_a_hostile_checkout(hostile_checkout):
    checkout, env = hostile_checkout
    # one problem is enough: the path reaches every command alike
    table, run_dir = run_table(checkout, env, "operator_benchmark/fno_benchmark.xml",
                               "operator_benchmark/operator_benchmark_run", "CPU", "smoke", "rbc2d")
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["Problem"], row["Status"]) == ("rbc2d-small", "ok"), row.to_dict()
    assert row["Samples/s"] > 0 and row["Energy(Wh)"] > 0
    check_ran_from_the_copy(run_dir, checkout)


def test_a_comma_in_the_path_is_refused_before_jube_starts(tmp_path):
    """JUBE splits the checkout's path at a comma into two values."""
    checkout = tmp_path / "a,b" / "caraml"
    (checkout / "aux").mkdir(parents=True)
    for name in ("checkout_path.sh", "setup.sh", "run_benchmarks.sh"):
        shutil.copy2(ROOT / "aux" / name, checkout / "aux" / name)
    proc = subprocess.run(["bash", str(checkout / "aux/run_benchmarks.sh")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"CARAML ERROR: the checkout path {checkout} holds ',', at which JUBE "
                           "splits a value (the path would become two); move the checkout to a "
                           "path without commas\n")


# the README's other route: `jube run` itself, from a checkout whose path would
# run commands in JUBE's own shell line; each script's first step refuses it
JUBE_RUNS = [
    ("image_classification/image_classification_torch_benchmark.xml",
     "image_classification/image_classification_benchmark_run", ["CPU", "smoke"]),
    ("llm_training/llm_benchmark_nvidia_amd.yaml", "llm_training/llm_benchmark_nvidia_amd_run",
     ["CPU", "smoke"]),
    ("llm_training/llm_benchmark_nvidia_amd.yaml", "llm_training/llm_benchmark_nvidia_amd_run",
     ["CPU", "dryrun"]),
    ("operator_benchmark/fno_benchmark.xml", "operator_benchmark/operator_benchmark_run",
     ["CPU", "smoke", "rbc2d"]),
]


@pytest.mark.parametrize("script, outpath, tags", JUBE_RUNS)
def test_jube_run_refuses_a_path_it_would_run_commands_from(tmp_path, script, outpath, tags):
    from caraml.row import rows_of_run

    checkout = copy_tree(tmp_path / "x$(touch PWNED)`touch PWNED2`" / "repo")
    env = {**os.environ, "CARAML_VENV": str(ROOT / ".venv")}
    env.pop("CARAML_ROOT", None)
    subprocess.run(["jube", "run", script, "--hide-animation", "--tag", *tags], cwd=checkout,
                   env=env, capture_output=True, text=True, timeout=600)
    assert not list(tmp_path.rglob("PWNED*")), "a command hidden in the path ran"
    [run_dir] = [p for p in (checkout / outpath).iterdir() if p.is_dir()]
    rows = rows_of_run(run_dir)
    assert rows and all(row["status"]["state"] == "failed" for row in rows), \
        [row["status"] for row in rows]
    assert all(row["status"]["reason"].startswith(f"the checkout path {checkout} holds '$'")
               for row in rows), rows[0]["status"]


@pytest.mark.parametrize("char", list(REFUSED))
@pytest.mark.parametrize("command", ["aux/run_benchmarks.sh", "aux/setup.sh"])
def test_a_path_jube_cannot_run_is_refused_before_jube_starts(tmp_path, char, command):
    checkout = tmp_path / REFUSED[char] / "caraml"
    (checkout / "aux").mkdir(parents=True)
    for name in ("checkout_path.sh", "setup.sh", "run_benchmarks.sh"):
        shutil.copy2(ROOT / "aux" / name, checkout / "aux" / name)
    proc = subprocess.run(["bash", str(checkout / command)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"CARAML ERROR: the checkout path {checkout} holds '{char}', which "
                           "JUBE puts into a double-quoted shell line (it would end the quotes, "
                           "expand or run a command); move the checkout to a path without "
                           "\" $ ` \\ or line breaks\n")
    assert not list(tmp_path.rglob("PWNED*")) and not (checkout / ".venv").exists()
