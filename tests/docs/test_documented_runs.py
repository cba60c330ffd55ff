"""Documented commands that take seconds, run as the docs write them (their
text read from the doc), and the usage lines the docs give checked against
the command's own --help. Nothing is written into the checkout: a command
that writes files writes them into a temporary folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.documented import ROOT, commands_in

# the suite's Python first on PATH, so `python` in a doc's command is it
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
       "PYTHONPATH": str(ROOT)}


def _shell(command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=120)


def test_the_gpu_check_plan_of_gpu_readiness_is_what_plan_only_prints():
    """The plan at a lent node's limits, as the doc shows it, is the one the
    script prints today: a changed step or figure changes the doc too"""
    lines = (ROOT / "docs" / "gpu_readiness.md").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("    GPU check plan:"))
    last = next(i for i in range(first, len(lines)) if lines[i].startswith("    device time:"))
    shown = [line.removeprefix("    ") for line in lines[first:last + 1]]
    [command] = commands_in("docs/gpu_readiness.md", "bash aux/gpu_check.sh --plan-only")
    done = _shell(command)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == shown


def test_the_memory_plan_of_gpu_readiness_prints_the_plan_the_doc_states():
    doc = (ROOT / "docs" / "gpu_readiness.md").read_text()
    [command] = commands_in("docs/gpu_readiness.md", "python -c ")
    stated = re.search(r"gets micro-batch (\d+)\s+without recomputation: about ([\d.]+) GiB estimated\s+"
                       r"of ([\d.]+) GiB\s+usable", doc)
    assert stated, "docs/gpu_readiness.md no longer states the plan its command prints"
    done = _shell(command)
    assert done.returncode == 0, done.stderr
    plan = re.fullmatch(r"Plan\(recompute='(\w+)', micro_batch_size=(\d+), estimate_gib=([\d.]+), "
                        r"usable_gib=([\d.]+)\)\n", done.stdout)
    assert plan, done.stdout
    assert plan.group(1) == "none" and plan.group(2) == stated.group(1)
    assert f"{float(plan.group(3)):.1f}" == stated.group(2)
    assert f"{float(plan.group(4)):.1f}" == stated.group(3)


def test_the_power_limit_sweep_demo_of_compare_writes_its_report(tmp_path):
    [command] = commands_in("docs/compare.md",
                            "caraml-compare $(python -m tests.compare.rowfixtures /tmp/sweep_demo")
    done = _shell(command.replace("/tmp/sweep_demo", str(tmp_path / "sweep_demo")))
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "sweep_demo" / "out"
    assert (out / "report.html").is_file() and list(out.glob("frontier_A100_*.png")), done.stdout


# a usage line of the docs -> the command whose --help it must agree with
SYNOPSES = {
    ("docs/compare.md", "caraml-compare [SYSTEM=]RUN_DIR..."): "caraml-compare --help",
    ("docs/run_rules.md", "caraml-bundle RUN..."): "caraml-bundle --help",
    ("docs/run_rules.md", "caraml-check RUN_OR_BUNDLE..."): "caraml-check --help",
    ("jpwr/README.md", "jpwr [-q|-v] --methods M [M ...]"): "jpwr --help",
    ("jpwr/README.md", "jpwr combine [-q|-v] [--out FILE.csv]"): "jpwr combine --help",
    ("docs/llm_data.md", "python -m llm_training.data.prepare --corpus oscar|local|PATH"):
        "python -m llm_training.data.prepare --help",
    ("docs/results.md", ".venv/bin/python aux/perf/test_times.py [--only"):
        "python aux/perf/test_times.py --help",
    ("docs/setup.md", "python3 aux/wheelhouse.py /path/to/wheelhouse --python-version 3.12 ["):
        "python aux/wheelhouse.py --help",
}


@pytest.mark.parametrize("doc, start", SYNOPSES, ids=[start.split(" [")[0] for _, start in SYNOPSES])
def test_a_usage_line_names_only_options_its_command_has(doc, start):
    [synopsis] = commands_in(doc, start)
    done = _shell(SYNOPSES[doc, start])
    assert done.returncode == 0, done.stderr
    options = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", synopsis))
    assert options, synopsis
    unknown = sorted(o for o in options if not re.search(rf"(?<![\w-]){o}(?![\w-])", done.stdout))
    assert not unknown, f"{doc}: `{synopsis}` names options that `{SYNOPSES[doc, start]}` lacks: {unknown}"


def test_the_entry_of_adding_a_benchmark_runs_as_written(tmp_path):
    """The doc's example entry, copied into a file as a site would, is read
    as a registered benchmark, and its own column has the JUBE pattern the
    doc names, by the doc's own command."""
    doc = (ROOT / "docs" / "adding_a_benchmark.md").read_text()
    [code] = re.findall(r"```python\n(.*?)```", doc, re.DOTALL)
    entry = tmp_path / "entry.py"
    entry.write_text(code)
    [command] = commands_in("docs/adding_a_benchmark.md", "python -m caraml.benchmarks columns")
    done = subprocess.run(["bash", "-c", command], cwd=ROOT, env={**ENV, "CARAML_BENCHMARKS": str(entry)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "row_own1\tFeatures\tdata.features\n"
    assert f"`{done.stdout.strip().replace(chr(9), '  ')}`" in doc
    listed = subprocess.run([sys.executable, "-m", "caraml.benchmarks", "scripts"], cwd=ROOT,
                            env={**ENV, "CARAML_BENCHMARKS": str(entry)}, capture_output=True, text=True)
    assert "mlp\t/site/caraml/mlp.xml\t/site/caraml/mlp_run\tno" in listed.stdout.splitlines()
