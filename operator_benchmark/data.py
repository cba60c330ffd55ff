"""Training batches as endless iterators of (input fields, output fields)
on the device.

Synthetic data: a small pool of random batches made on the device before
training (outside the timing) and cycled, so the step measures the model,
not a host-to-device copy of random numbers. Generated data: the suite's
Navier-Stokes samples (navier_stokes.py), moved to the device once, each
rank taking its own share and visiting it in a new order every epoch."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import torch

from caraml.node.dist import Dist
from caraml.report import BenchmarkInputError
from operator_benchmark.problems import Problem

Batch = tuple[torch.Tensor, torch.Tensor]

SYNTHETIC_POOL = 2


def synthetic(problem: Problem, batch_size: int, device: torch.device, seed: int) -> Iterator[Batch]:
    generator = torch.Generator(device).manual_seed(seed)
    pool = [(torch.randn(batch_size, problem.in_fields, *problem.grid, device=device,
                         generator=generator),
             torch.randn(batch_size, problem.out_fields, *problem.grid, device=device,
                         generator=generator))
            for _ in range(SYNTHETIC_POOL)]
    return itertools.cycle(pool)


def shards(inputs: torch.Tensor, outputs: torch.Tensor, batch_size: int, dist: Dist,
           seed: int) -> Iterator[Batch]:
    """This rank's share of a dataset (every world_size-th sample from its
    rank on) in batches, epoch after epoch, reshuffled each epoch alike on
    every rank (the seed, not the rank, decides the order)."""
    mine = torch.arange(dist.rank, inputs.shape[0], dist.world_size)
    if mine.numel() < batch_size:
        raise BenchmarkInputError(
            f"generated data: {inputs.shape[0]} samples leave {mine.numel()} for each of "
            f"{dist.world_size} device(s): fewer than a batch of {batch_size}; raise "
            f"--generated-samples or lower the global batch size")
    inputs, outputs = inputs[mine].to(dist.device), outputs[mine].to(dist.device)
    generator = torch.Generator().manual_seed(seed)
    full = mine.numel() // batch_size * batch_size  # an epoch's whole batches

    def epochs() -> Iterator[Batch]:
        while True:
            order = torch.randperm(inputs.shape[0], generator=generator)[:full].to(dist.device)
            for batch in order.split(batch_size):
                yield inputs[batch], outputs[batch]

    return epochs()
