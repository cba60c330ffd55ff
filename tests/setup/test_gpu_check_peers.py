"""The peer comparisons aux/gpu_check.sh starts, checked on the CPU before a
GPU node's minutes are spent on them: each command line is accepted by its
script's own parser, and the model, size and problem it names exist in the
suite. A flag renamed in a script, or a size dropped, fails here rather than
in the peers step of a lent GPU's run."""

from __future__ import annotations

import importlib
import shlex
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PERF = ROOT / "aux" / "perf"


def peer_commands() -> dict[str, list[str]]:
    """Each `peer CAP aux/perf/SCRIPT.py ARGS` of gpu_check.sh, its
    continuation lines joined: the script's name and its arguments"""
    text = (ROOT / "aux" / "gpu_check.sh").read_text().replace("\\\n", " ")
    commands = {}
    for line in text.splitlines():
        if not line.strip().startswith("peer "):
            continue
        words = shlex.split(line.split("||")[0])
        if words[2].startswith("aux/perf/"):
            commands[Path(words[2]).stem] = words[3:]
    return commands


def test_gpu_check_starts_the_three_peers():
    assert sorted(peer_commands()) == ["fno_peers", "ic_peers", "llm_peers"]


@pytest.fixture
def parsed(monkeypatch, tmp_path):
    """The script's parse() on gpu_check's arguments, as on a GPU node"""
    monkeypatch.syspath_prepend(str(PERF))
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def parse(script: str, *extra: str):
        module = importlib.import_module(script)
        monkeypatch.setattr(sys, "argv", [script, *peer_commands()[script], *extra,
                                          "--out", str(tmp_path)])
        return module.parse()
    return parse


def test_the_llm_peer_names_a_size_and_backends_the_suite_has(parsed):
    from llm_training import model_sizes
    a = parsed("llm_peers")
    assert a.model_size in model_sizes.SIZES
    assert a.precision in model_sizes.PRECISIONS
    assert a.global_batch_size % a.micro_batch_size == 0
    assert {"megatron", "torch"} <= set(a.models)


def test_the_image_peer_names_a_model_the_suite_builds(parsed):
    from image_classification import model
    a = parsed("ic_peers")
    assert a.model in model.names()
    assert a.batch_sizes == [256, 1024]


def test_the_operator_peer_names_a_full_sized_problem(parsed):
    from operator_benchmark import problems
    a = parsed("fno_peers")
    for name in a.problems:
        problems.get(name)
        assert not name.endswith(problems.SMALL_SUFFIX)


def test_a_flag_the_script_lacks_stops_its_parser(parsed):
    with pytest.raises(SystemExit):
        parsed("fno_peers", "--as-run-turns", "2")


@pytest.mark.parametrize("script", ["llm_peers", "ic_peers", "fno_peers"])
def test_every_peer_runs_two_as_run_rounds_not_its_scripts_default(parsed, script):
    """Every round starts the driver and the plain loop afresh: the
    scripts' defaults (16 rounds for the FNO) do not fit the step's caps"""
    assert parsed(script).as_run_rounds == 2
