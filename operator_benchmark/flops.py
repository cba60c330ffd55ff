"""The FLOPs torch's own counter (torch.utils.flop_counter.FlopCounterMode)
counts for one training step, forward and backward, of one sample.

What it counts and leaves out, for an FNO: it counts matrix products and
convolutions (the lifting, projection, channel-MLP and skip layers, and the
spectral contraction, which reaches it as a batched matrix product); it has
no formula for FFTs, so every forward and inverse FFT of the spectral
convolutions is left out; and it counts a complex multiply-add like a real
one (2 FLOPs, where it takes 8 real ones), so the spectral contraction is
undercounted. The figure is therefore a lower bound on the arithmetic done,
labelled as counted."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from operator_benchmark import model
from operator_benchmark.problems import Problem

NOTE = "counted-excludes-fft-complex-as-real"


def counted_per_sample(net: nn.Module, problem: Problem, device: torch.device) -> int:
    """FLOPs of forward and backward of one sample, counted on a copy of
    the input's shape; the gradients it leaves are cleared."""
    x = torch.zeros(1, problem.in_fields, *problem.grid, device=device)
    y = torch.zeros(1, problem.out_fields, *problem.grid, device=device)
    with FlopCounterMode(display=False) as counter:
        model.loss(net(x), y).backward()
    net.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def main() -> int:
    """A table of every problem's parameters and counted FLOPs per sample
    (for docs/operator_benchmark.md), counted on the CPU."""
    from operator_benchmark import problems

    print("| problem | grid | fields in/out | modes | width | layers | parameters (real) "
          "| counted GFLOP per sample (fwd+bwd) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    cpu = torch.device("cpu")
    for name in problems.names():
        p = problems.get(name)
        torch.manual_seed(0)
        net = model.build(p, cpu)
        print(f"| {name} | {p.grid_text} | {p.in_fields}/{p.out_fields} | {p.value('modes')} "
              f"| {p.width} | {p.layers} | {model.parameter_count(net):,} "
              f"| {counted_per_sample(net, p, cpu) / 1e9:.3g} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
