"""The torch backend's training step: gradient accumulation over
micro-batches equals one step on the whole batch, and the optimizer
really trains the model."""

import dataclasses
import itertools

import torch
from llm_helpers import TINY

from caraml.node.dist import Dist
from llm_training import arguments
from llm_training.torch_backend import TorchBackend


def backend(dist: Dist, *flags: str) -> TorchBackend:
    args = arguments.parse([*TINY, "--train-iters", "2", "--energy-methods", "none", *flags])
    layout = arguments.resolve_layout(args, world_size=1)
    # No dropout, so two runs over the same samples compute the same thing.
    gpt = dataclasses.replace(arguments.gpt_config(args, args.vocab_size), dropout=0.0)
    return TorchBackend(gpt, args, layout, dist)


def samples(n: int) -> dict[str, torch.Tensor]:
    text = torch.randint(0, 128, (n, 17), generator=torch.Generator().manual_seed(1))
    return {"tokens": text[:, :-1], "labels": text[:, 1:], "loss_mask": torch.ones(n, 16)}


def split(batch: dict[str, torch.Tensor], size: int):
    n = len(batch["tokens"])
    return iter([{k: v[i:i + size] for k, v in batch.items()} for i in range(0, n, size)])


def test_gradient_accumulation_equals_one_big_micro_batch(single_cpu):
    batch = samples(4)
    accumulated = backend(single_cpu, "--micro-batch-size", "1", "--global-batch-size", "4")
    whole = backend(single_cpu, "--micro-batch-size", "4", "--global-batch-size", "4")
    assert accumulated.microbatches == 4 and whole.microbatches == 1
    loss_accumulated, skipped = accumulated.train_step(split(batch, 1))
    loss_whole, _ = whole.train_step(split(batch, 4))
    assert skipped is False  # fp32: no scaler to skip an update
    assert abs(loss_accumulated - loss_whole) < 1e-5
    for a, w in zip(accumulated.params, whole.params, strict=True):
        torch.testing.assert_close(a, w, rtol=1e-5, atol=1e-6)
    initial = backend(single_cpu).params  # same seed: the weights before the step
    assert any(not torch.equal(w, i) for w, i in zip(whole.params, initial, strict=True))


def test_repeated_batch_is_learned(single_cpu):
    b = backend(single_cpu, "--lr", "0.01")
    batches = itertools.repeat(samples(2))
    losses = [b.train_step(batches).loss for _ in range(12)]
    assert losses[-1] < 0.5 * losses[0]
