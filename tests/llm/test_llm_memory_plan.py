"""Recomputation and micro-batch chosen from the device's memory: the
estimate against hand-computed bytes, the choice at the edges of fitting,
and `auto` resolved through the driver (the row names what was chosen)."""

import pytest
import torch
from llm_helpers import TINY

from caraml.report import BenchmarkInputError
from llm_training import arguments, memory_plan, pretrain_gpt
from llm_training.flops import parameter_count
from llm_training.model_sizes import GPTConfig
from tests.driver_runs import parse_caraml

SMALL = GPTConfig(num_layers=2, hidden_size=64, num_attention_heads=4, ffn_hidden_size=256,
                  seq_length=32, vocab_size=256)


def setup(*flags):
    args = arguments.parse(["--model-size", "800M", "--synthetic", "--train-iters", "2",
                            "--energy-methods", "none", "--no-use-distributed-optimizer",
                            *flags])
    return args, arguments.resolve_layout(args, world_size=1)


@pytest.mark.parametrize("backend, precision, sharded, expected", [
    ("megatron", "fp16", 1, 2 + 2 + 12),
    ("megatron", "bf16", 4, 2 + 4 + 3),
    ("torch", "bf16", 2, 4 + 4 + 4 + 2),  # autocast's 16-bit weight copies
    ("megatron", "fp32", 1, 16),
])
def test_state_bytes_per_parameter(backend, precision, sharded, expected):
    assert memory_plan.state_bytes_per_parameter(backend, precision, sharded) == expected


def test_estimate_by_hand():
    args, layout = setup("--backend", "megatron", "--precision", "fp16", "--micro-batch-size", "2",
                         "--global-batch-size", "8")
    sbh = 32 * 2 * 64
    states = parameter_count(SMALL) * 16
    logits = 10 * 32 * 2 * 256
    assert memory_plan.estimate_bytes(SMALL, layout, args, "none", 2) == \
        states + 2 * 38 * sbh + logits
    # full recomputation keeps each layer's input, and one layer's activations while it recomputes
    assert memory_plan.estimate_bytes(SMALL, layout, args, "full", 2) == \
        states + 2 * 2 * sbh + 38 * sbh + logits


def test_the_largest_micro_batch_that_fits_without_recomputation_is_chosen():
    args, layout = setup("--backend", "megatron", "--precision", "fp16", "--micro-batch-size", "2",
                         "--global-batch-size", "8")
    fits_four = memory_plan.estimate_bytes(SMALL, layout, args, "none", 4) / memory_plan.USABLE_FRACTION
    plan = memory_plan.choose(SMALL, layout, args, fits_four, auto_recompute=True,
                              auto_micro_batch=True)
    assert (plan.recompute, plan.micro_batch_size) == ("none", 4)


def test_recomputation_only_when_nothing_fits_without():
    args, layout = setup("--backend", "megatron", "--precision", "fp16", "--micro-batch-size", "2",
                         "--global-batch-size", "8")
    none_1 = memory_plan.estimate_bytes(SMALL, layout, args, "none", 1)
    full_1 = memory_plan.estimate_bytes(SMALL, layout, args, "full", 1)
    assert full_1 < none_1
    plan = memory_plan.choose(SMALL, layout, args, full_1 / memory_plan.USABLE_FRACTION,
                              auto_recompute=True, auto_micro_batch=True)
    assert (plan.recompute, plan.micro_batch_size) == ("full", 1)


def test_800m_fits_an_80_gib_gpu_without_recomputation():
    # 909 M parameters x 18 B (bf16) = 16.4 GB of states; 3.6 GB per sample of
    # micro-batch (38 s h L + 10 s V): 8 samples fit in 85 % of 80 GiB, 16 do not.
    args, layout = setup("--backend", "megatron", "--precision", "bf16",
                         "--micro-batch-size", "auto", "--global-batch-size", "64",
                         "--recompute-activations", "auto")
    gpt = arguments.gpt_config(args, args.vocab_size)
    plan = memory_plan.choose(gpt, layout, args, 80 * 2**30, auto_recompute=True,
                              auto_micro_batch=True)
    assert (plan.recompute, plan.micro_batch_size) == ("none", 8)


def test_auto_micro_batch_needs_a_fixed_global_batch():
    with pytest.raises(BenchmarkInputError, match="needs a fixed global batch"):
        arguments.parse(["--model-size", "13B", "--synthetic", "--train-iters", "2",
                         "--energy-methods", "none", "--micro-batch-size", "auto"])


def test_the_driver_reports_what_auto_chose(capsys):
    code = pretrain_gpt.main([*TINY, "--train-iters", "2", "--warmup-iters", "1",
                              "--energy-methods", "none", "--recompute-activations", "auto",
                              "--micro-batch-size", "auto"])
    out = capsys.readouterr().out
    assert code == 0
    line = parse_caraml(out)["global"]
    assert (line["recompute"], line["micro_batch_size"]) == ("none", "4")
    assert "memory plan: recompute none, micro-batch 4" in out


def test_out_of_memory_names_the_micro_batch_that_ran(capsys, monkeypatch):
    from llm_training.torch_backend import TorchBackend

    def exhausted(self, batches):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(TorchBackend, "train_step", exhausted)
    code = pretrain_gpt.main([*TINY, "--train-iters", "2", "--warmup-iters", "1",
                              "--energy-methods", "none", "--micro-batch-size", "auto",
                              "--global-batch-size", "8"])
    err = capsys.readouterr().err
    assert code == 2  # an input error: the run asked for more than the device holds
    # the plan chose 8 (the size's default is 4)
    assert err.startswith("CARAML ERROR: out of memory at 8 samples per device")
    assert "lower --micro-batch-size" in err
