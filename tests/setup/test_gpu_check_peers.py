"""The peer comparisons aux/gpu_check.sh starts, checked on the CPU before a
GPU node's minutes are spent on them: each command line of every size the
plan (aux/gpu_plan.py) may give them is accepted by its script's own
parser, and the model, size and problem it names exist in the suite. A
flag renamed in a script, or a size dropped, fails here rather than in a
peer step of a lent GPU's run."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "aux"))
import gpu_plan

ROOT = Path(__file__).resolve().parents[2]
PERF = ROOT / "aux" / "perf"

PEERS = [step for step in gpu_plan.STEPS if step.function == "peer"]
SIZES = [(step.name, i) for step in PEERS for i in range(len(step.sizes))]


def peer_command(step_name: str, size: int) -> tuple[str, list[str]]:
    """The script's name and its arguments, as gpu_check.sh's peer step gets them"""
    step = next(s for s in PEERS if s.name == step_name)
    script, *args = step.sizes[size].args
    return Path(script).stem, args


def test_gpu_check_starts_the_three_peers():
    assert sorted({peer_command(*size)[0] for size in SIZES}) == ["fno_peers", "ic_peers", "llm_peers"]
    assert all((ROOT / s.sizes[0].args[0]).is_file() for s in PEERS)


@pytest.fixture
def parsed(monkeypatch, tmp_path):
    """The script's parse() on a peer step's arguments, as on a GPU node"""
    monkeypatch.syspath_prepend(str(PERF))
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def parse(step_name: str, size: int, *extra: str):
        script, args = peer_command(step_name, size)
        module = importlib.import_module(script)
        monkeypatch.setattr(sys, "argv", [script, *args, *extra, "--out", str(tmp_path)])
        return module.parse()
    return parse


@pytest.mark.parametrize("size", range(3))
def test_the_llm_peer_names_a_size_and_backends_the_suite_has(parsed, size):
    from llm_training import model_sizes
    a = parsed("peers_llm", size)
    assert a.model_size in model_sizes.SIZES
    assert a.precision in model_sizes.PRECISIONS
    assert a.global_batch_size % a.micro_batch_size == 0
    assert {"megatron", "torch"} <= set(a.models)


@pytest.mark.parametrize("size", range(3))
def test_the_image_peer_names_a_model_the_suite_builds(parsed, size):
    from image_classification import model
    a = parsed("peers_ic", size)
    assert a.model in model.names()
    assert a.batch_sizes == [256, 1024]


@pytest.mark.parametrize("size", range(3))
def test_the_operator_peer_names_a_full_sized_problem(parsed, size):
    from operator_benchmark import problems
    a = parsed("peers_fno", size)
    for name in a.problems:
        problems.get(name)
        assert not name.endswith(problems.SMALL_SUFFIX)


def test_a_flag_the_script_lacks_stops_its_parser(parsed):
    with pytest.raises(SystemExit):
        parsed("peers_fno", 0, "--as-run-turns", "2")


@pytest.mark.parametrize("step_name, size", SIZES)
def test_every_peer_size_runs_at_most_two_as_run_rounds_not_its_scripts_default(parsed, step_name, size):
    """Every round starts the driver and the plain loop afresh: the
    scripts' defaults (16 rounds for the FNO) do not fit a step's cap; each
    smaller size runs fewer"""
    rounds = [parsed(step_name, i).as_run_rounds for i in range(size + 1)]
    assert rounds[-1] <= 2
    assert rounds == sorted(rounds, reverse=True) and len(set(rounds)) == len(rounds)
