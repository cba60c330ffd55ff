"""Checkouts under hostile names, through the real JUBE. A name JUBE itself
can run (tests/checkouts.py RUNNABLE: quotes, `;`, `&`, `|`, `*`, `#`,
parentheses, spaces) runs every benchmark with every command of the suite
taking it as it is: no command hidden in it runs and the rows are right
(the image benchmark here, with its environment elsewhere; the LLM, its
corpus in such a path too, and the operator benchmark through the main
command: tests/reliability/test_main_command.py). A name JUBE would run commands
from (`"`, `$`, a backtick, a backslash) is refused before JUBE starts, with
one line that names the character."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.checkouts import RUNNABLE, check_ran_from_the_copy, commands_ran, copy_tree
from tests.jube_runs import ROOT, JubeRun

pytestmark = pytest.mark.jube

REFUSED = {'"': 'a"; touch PWNED4; "b', "$": "a$(touch PWNED5)b", "`": "a`touch PWNED6`b",
           "\\": "a\\b"}


@pytest.fixture
def hostile_checkout(tmp_path):
    checkout = copy_tree(tmp_path / RUNNABLE / "caraml")
    # the environment lives elsewhere: CARAML_VENV names it
    env = {**os.environ, "CARAML_VENV": str(ROOT / ".venv")}
    env.pop("CARAML_ROOT", None)
    yield checkout, env
    assert not commands_ran(tmp_path), "a command hidden in the path ran"


def jube(checkout: Path, env: dict[str, str], *args: str) -> str:
    proc = subprocess.run(["jube", *args, "--hide-animation"] if args[0] == "run" else
                          ["jube", *args], cwd=checkout, env=env, text=True,
                          capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def run_table(checkout: Path, env: dict[str, str], script: str, outpath: str,
              *tags: str) -> tuple[pd.DataFrame, JubeRun]:
    jube(checkout, env, "run", script, "--tag", *tags)
    jube(checkout, env, "continue", outpath, "-i", "last")
    assert jube(checkout, env, "status", outpath, "-i", "last").strip() == "FINISHED"
    jube(checkout, env, "result", outpath, "-i", "last")
    run = JubeRun(str(checkout / script), checkout / outpath)
    return run.csv(), run


def test_image_classification_runs_from_a_hostile_checkout(hostile_checkout):
    checkout, env = hostile_checkout
    table, run = run_table(checkout, env, "image_classification/"
                               "image_classification_torch_benchmark.xml",
                               "image_classification/image_classification_benchmark_run",
                               "CPU", "smoke")
    assert len(table) == 1
    row = table.iloc[0]
    assert row["Status"] == "ok", row.to_dict()
    assert row["Images/s"] > 0 and row["Energy(Wh)"] > 0
    check_ran_from_the_copy(run, checkout)


def test_a_comma_in_the_path_is_refused_before_jube_starts(tmp_path):
    """JUBE splits the checkout's path at a comma into two values."""
    checkout = tmp_path / "a,b" / "caraml"
    (checkout / "aux").mkdir(parents=True)
    for name in ("checkout_path.sh", "log_level.sh", "setup.sh", "run_benchmarks.sh"):
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
    from caraml.row.run import rows_of_run

    checkout = copy_tree(tmp_path / "x$(touch PWNED)`touch PWNED2`" / "repo")
    env = {**os.environ, "CARAML_VENV": str(ROOT / ".venv")}
    env.pop("CARAML_ROOT", None)
    subprocess.run(["jube", "run", script, "--hide-animation", "--tag", *tags], cwd=checkout,
                   env=env, capture_output=True, text=True, timeout=600)
    assert not commands_ran(tmp_path), "a command hidden in the path ran"
    [run_dir] = [p for p in (checkout / outpath).iterdir() if p.is_dir()]
    rows = rows_of_run(run_dir)
    assert rows and all(row.state == "failed" for row in rows), [(row.state, row.reason) for row in rows]
    assert all(row.reason.startswith(f"the checkout path {checkout} holds '$'") for row in rows), \
        rows[0].reason


@pytest.mark.parametrize("char", list(REFUSED))
@pytest.mark.parametrize("command", ["aux/run_benchmarks.sh", "aux/setup.sh"])
def test_a_path_jube_cannot_run_is_refused_before_jube_starts(tmp_path, char, command):
    checkout = tmp_path / REFUSED[char] / "caraml"
    (checkout / "aux").mkdir(parents=True)
    for name in ("checkout_path.sh", "log_level.sh", "setup.sh", "run_benchmarks.sh"):
        shutil.copy2(ROOT / "aux" / name, checkout / "aux" / name)
    proc = subprocess.run(["bash", str(checkout / command)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (f"CARAML ERROR: the checkout path {checkout} holds '{char}', which "
                           "JUBE puts into a double-quoted shell line (it would end the quotes, "
                           "expand or run a command); move the checkout to a path without "
                           "\" $ ` \\ or line breaks\n")
    assert not commands_ran(tmp_path) and not (checkout / ".venv").exists()


@pytest.mark.parametrize("script, outpath, tags", [JUBE_RUNS[0], JUBE_RUNS[2]])
def test_jube_run_from_a_path_with_a_double_quote_fails_its_rows_naming_it(tmp_path, script, outpath, tags):
    """JUBE's own line for a step (`<command> && env > "<work dir>/..."`) does
    not parse with a " in the path; the path check runs on the step's first
    line all the same, and every row fails naming the character."""
    from caraml.row.run import rows_of_run

    checkout = copy_tree(tmp_path / 'a"b' / "repo")
    env = {**os.environ, "CARAML_VENV": str(ROOT / ".venv")}
    env.pop("CARAML_ROOT", None)
    subprocess.run(["jube", "run", script, "--hide-animation", "--tag", *tags], cwd=checkout,
                   env=env, capture_output=True, text=True, timeout=600)
    [run_dir] = [p for p in (checkout / outpath).iterdir() if p.is_dir()]
    rows = rows_of_run(run_dir)
    reason = (f"the checkout path {checkout} holds '\"', which JUBE puts into a double-quoted shell "
              "line (it would end the quotes, expand or run a command); move the checkout to a path "
              "without \" $ ` \\ or line breaks")
    assert rows and all((row.state, row.reason) == ("failed", reason) for row in rows), \
        [(row.state, row.reason) for row in rows]
    # JUBE's own table, as a user looks at it: Status and Cause filled
    shown = jube(checkout, env, "result", outpath, "-i", "last")
    issues = shown.split("issues:")[1]
    assert "| failed |" in issues and "holds '\"'" in " ".join(issues.replace("|", " ").split()), shown
