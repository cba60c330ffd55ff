"""The megatron backend on the CPU, through megatron-core's own code.

The reported loss through megatron-core's own
schedule (forward_backward_no_pipelining), on the CPU: the schedule divides
the loss its forward step returns in place by the number of micro-batches,
so a reported loss that shares the storage (a detach()) would come out
divided as well. The only fake is at the device boundary: the one tensor the
schedule makes on "cuda" (its token counter) is made on the CPU.

Weight decay: megatron-core's optimizer groups mark biases and norm
weights with a multiplier of 0 that only Megatron-LM's scheduler applies."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

pytest.importorskip("megatron.core")
from megatron.core import parallel_state
from megatron.core.optimizer import OptimizerConfig, _get_param_groups

from llm_training import arguments, megatron_backend, pretrain_gpt

MICROBATCHES = 4
FLAGS = ["--model-size", "cpu-small", "--num-layers", "1", "--hidden-size", "32",
         "--num-attention-heads", "2", "--seq-length", "16", "--synthetic", "--vocab-size", "128",
         "--micro-batch-size", "2", "--global-batch-size", str(2 * MICROBATCHES),
         "--num-workers", "0", "--device", "cpu", "--backend", "megatron", "--train-iters", "2",
         "--energy-methods", "none"]


class CudaTensorsOnTheCpu(TorchFunctionMode):
    """Tensors asked for on "cuda" are made on the CPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return func(*args, **kwargs)


def micro_batches(seed: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(MICROBATCHES):
        tokens = torch.randint(128, (2, 16), generator=g)
        mask = torch.ones(2, 16)
        mask[:, -3:] = 0  # a masked tail, as at a document's end
        batches.append({"tokens": tokens, "labels": torch.roll(tokens, -1, dims=1),
                        "loss_mask": mask})
    return batches


def masked_mean_loss(model, batch, position_ids) -> float:
    with torch.no_grad():
        per_token = model(batch["tokens"], position_ids, None, labels=batch["labels"])
    mask = batch["loss_mask"].reshape(-1)
    return float((per_token.float().reshape(-1) * mask).sum() / mask.sum())


@pytest.fixture
def backend(single_cpu, monkeypatch):
    # megatron-core's rotary embedding moves its frequencies to the current CUDA device
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "cpu")
    args = arguments.parse(FLAGS)
    layout = arguments.resolve_layout(args, single_cpu.world_size)
    assert layout.microbatches == MICROBATCHES
    built = pretrain_gpt.build_backend(arguments.gpt_config(args, args.vocab_size), args,
                                       layout, single_cpu)
    yield built
    parallel_state.destroy_model_parallel()


def test_the_reported_loss_is_the_mean_over_micro_batches_not_divided_again(backend):
    batches = micro_batches(seed=3)
    model = backend.model
    model.eval()  # no dropout: the expected losses and the schedule's see the same model
    expected = sum(masked_mean_loss(model, b, backend.position_ids) for b in batches) / MICROBATCHES
    with CudaTensorsOnTheCpu():
        reported = backend.forward_backward_loss(iter(batches))
    assert expected > 3  # about ln(128) = 4.85 for an untrained model
    assert reported == pytest.approx(expected, rel=1e-5)
    # the backward ran: every weight has a gradient
    assert all(p.grad is not None or getattr(p, "main_grad", None) is not None
               for p in model.parameters())


def test_biases_and_norms_get_no_weight_decay(backend):
    # The groups and the optimizer as megatron-core's get_megatron_optimizer makes them
    groups = _get_param_groups([backend.model], OptimizerConfig(lr=1e-4, weight_decay=0.1), None)
    optimizer = torch.optim.AdamW(groups, lr=1e-4, weight_decay=0.1)
    decay = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    assert set(decay.values()) == {0.1}  # megatron-core alone decays every parameter

    megatron_backend.apply_weight_decay_multipliers(optimizer.param_groups, 0.1)
    decay = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    params = dict(backend.model.named_parameters())
    assert any(name.endswith(".bias") for name in params)
    assert any("layernorm" in name or "norm" in name for name in params)
    for name, p in params.items():
        # the torch backend's rule: matrices (and embeddings) decay, vectors do not
        assert decay[id(p)] == (0.1 if p.ndim >= 2 else 0.0), name
