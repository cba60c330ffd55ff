"""Values JUBE computes while it expands the parameters (LOCAL's devices, a
model size's node count or sequence length) run in JUBE's own process,
before any step exports CARAML_ROOT. No python- or shell-mode parameter of
the JUBE files holds the checkout's path in its source: they run the
suite's tools through platform.xml's `expand_tool`, the one parameter that
hands the shell the path, as data in a quoted here-document."""

from __future__ import annotations

import os
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest

from caraml.login import preflight
from tests.checkouts import copy_tree
from tests.jube_runs import ROOT, JubeRun

# the JUBE variables that are paths; a parameter that refers to one, or to a
# parameter that does, carries a path
PATH_VARIABLES = {"jube_benchmark_home", "jube_benchmark_rundir", "jube_wp_abspath",
                  "jube_wp_relpath"}
TOOL = "expand_tool"
# every benchmark's JUBE script: the files beside the benchmarks that define parameters
SCRIPTS = sorted(str(path.relative_to(ROOT)) for pattern in ("*/*.xml", "*/*.yaml")
                 for path in ROOT.glob(pattern) if "<parameterset" in path.read_text()
                 or "parameterset:" in path.read_text())
# a name JUBE can run, with what a shell or Python would run if it reached their source
HOSTILE = "it's ;touch PWNED1;(x) & touch PWNED2 '+str(__import__('os').system('touch PWNED3'))+'"


def parameters(path) -> list[tuple[str, str, str]]:
    """(name, mode, text) of every parameter of a JUBE script."""
    if path.suffix == ".xml":
        return [(p.get("name"), p.get("mode", "text"), p.text or "")
                for p in ET.parse(path).getroot().iter("parameter")]
    found = []
    for pset in preflight.load_yaml_script(path).get("parameterset", []):
        for p in pset.get("parameter", []):
            found.append((p["name"], p.get("mode", "text"), str(p.get("_", ""))))
    return found


def references(text: str) -> set[str]:
    """The JUBE parameters a text substitutes ($$ is the shell's own $)."""
    text = text.replace("$$", "")
    return {a or b for a, b in re.findall(r"\$\{(\w+)\}|\$(\w+)", text)}


def path_carriers(params: list[tuple[str, str, str]]) -> set[str]:
    """The parameters whose text holds a path, through any chain of text
    parameters (a computed one holds what its code prints), expand_tool
    left out."""
    carriers = set(PATH_VARIABLES)
    while True:
        more = {name for name, mode, text in params
                if mode == "text" and name != TOOL and references(text) & carriers} - carriers
        if not more:
            return carriers
        carriers |= more


def test_the_scripts_are_found():
    assert {"image_classification/image_classification_torch_benchmark.xml",
            "llm_training/llm_benchmark_nvidia_amd.yaml",
            "llm_training/llm_benchmark_ipu.yaml"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_no_computed_parameter_holds_the_checkouts_path(script):
    """A python- or shell-mode parameter reaches the checkout only through
    expand_tool; platform.xml's parameters count for every benchmark."""
    params = parameters(ROOT / "platform.xml") + parameters(ROOT / script)
    carriers = path_carriers(params)
    computed = [(name, text) for name, mode, text in params if mode in ("python", "shell")]
    assert computed
    pasted = [(name, text) for name, text in computed if references(text) & carriers]
    assert pasted == []


def test_expand_tool_hands_the_path_over_as_data():
    [(mode, text)] = [(m, t) for n, m, t in parameters(ROOT / "platform.xml") if n == TOOL]
    assert mode == "text"
    lines = text.splitlines()
    # the only line that refers to the path is the body of a here-document
    # whose quoted delimiter keeps every character of it literal
    [at] = [i for i, line in enumerate(lines) if references(line) & PATH_VARIABLES]
    assert lines[at] == "${jube_benchmark_home}/.."
    assert lines[at - 1] == "IFS= read -r CARAML_ROOT <<'CARAML_CHECKOUT'"
    assert lines[at + 1] == "CARAML_CHECKOUT"


def test_expand_tool_runs_a_tool_of_a_checkout_whose_path_a_shell_would_run(tmp_path):
    """Even the characters JUBE itself cannot take ($, a backtick, a double
    quote, a backslash) reach the tool as they are: nothing in the path runs."""
    [text] = [t for n, _, t in parameters(ROOT / "platform.xml") if n == TOOL]
    checkout = tmp_path / 'a"$(touch PWNED4)`touch PWNED5`\\b'
    checkout.symlink_to(ROOT)
    # what JUBE makes of it: its substitution, then $$ as the shell's $
    command = text.replace("${jube_benchmark_home}", str(checkout / "llm_training"))
    command = command.replace("$$", "$") + " -m llm_training.model_sizes nodes 13B"
    out = subprocess.run(["/bin/sh", "-c", command], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert (out.returncode, out.stdout) == (0, "44"), out.stderr
    assert not list(tmp_path.rglob("PWNED*"))


@pytest.mark.jube
def test_jube_expands_local_and_a_sizes_nodes_from_a_hostile_checkout(tmp_path):
    """The real JUBE, from a checkout under a name with quotes, `;`, `&` and
    parentheses: LOCAL's values and 13B's node count are what the tools say."""
    checkout = copy_tree(tmp_path / HOSTILE / "caraml")
    env = {**os.environ, "CARAML_VENV": str(ROOT / ".venv")}
    env.pop("CARAML_ROOT", None)

    def dry_run(script, *tags):
        run = JubeRun(script, tmp_path / f"run{len(tags)}", env=env)
        subprocess.run(["jube", "run", str(checkout / script), "--hide-animation", "-o",
                        str(run.outpath), "--tag", *tags, "dryrun"], cwd=tmp_path, env=env,
                       check=True, capture_output=True, timeout=600)
        [work] = run.work_dirs("execute")[:1]
        return dict(line.split("=", 1) for line in (work / "job.facts").read_text().splitlines()
                    if "=" in line)

    local = dry_run("image_classification/image_classification_torch_benchmark.xml", "LOCAL")
    assert local["system_name"] == "LOCAL" and local["system_description"].startswith("this host")
    assert local["device_kind"] in ("cpu", "cuda", "rocm") and int(local["devices_per_node"]) >= 1
    jedi = dry_run("llm_training/llm_benchmark_nvidia_amd.yaml", "13B", "JEDI")
    assert (jedi["system_name"], jedi["nodes"]) == ("JEDI", "44")
    assert not list(tmp_path.rglob("PWNED*")), "a command hidden in the path ran"


def test_a_size_the_table_lacks_is_one_line_and_no_value(capsys):
    from llm_training import model_sizes

    assert model_sizes.main(["nodes", "7B"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1
    assert out.err.startswith("CARAML ERROR: model_sizes: 'nodes 7B' is not FIELD SIZE; sizes: ")
    assert model_sizes.main(["seq_length", "117M"]) == 0 and capsys.readouterr().out == "1024"
