"""Sequence parallelism on a ROCm system is refused on the login node
(llm_training/layout_check.py), not on the node after the queue wait:
megatron-core's torch LayerNorm, all the suite's ROCm image offers, refuses
it."""

from __future__ import annotations

from llm_training import layout_check


def check(capsys, *args):
    code = layout_check.main(list(args))
    out = capsys.readouterr()
    return code, out.out.strip(), out.err.strip()


def test_sequence_parallel_on_rocm_is_refused_before_submission(capsys):
    code, out, err = check(capsys, "--system", "MI250", "--nodes", "1", "--devices-per-node", "8",
                           "--model-size", "13B")
    assert code == 2 and out == ""
    assert err == ("CARAML ERROR: 13B on MI250: sequence parallelism (tp=2) needs Transformer "
                   "Engine or Apex layer norms and the suite's ROCm image has neither; run the "
                   "torch backend (--tag torch) or a size with tensor parallel size 1")


def test_the_same_layout_passes_on_nvidia_and_without_tensor_parallelism_on_rocm(capsys):
    code, out, _ = check(capsys, "--system", "A100", "--nodes", "2", "--devices-per-node", "4",
                         "--model-size", "13B")
    assert code == 0 and "tp=2" in out
    code, out, _ = check(capsys, "--system", "MI250", "--nodes", "1", "--devices-per-node", "8",
                         "--model-size", "800M")
    assert code == 0 and "tp=1" in out
