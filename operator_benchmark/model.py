"""The network: neuraloperator's Fourier Neural Operator built for a
problem, its spectral convolutions kept in fp32, wrapped for data
parallelism and optionally compiled; and the loss it trains on.

Mixed precision and FFTs: under bf16 autocast, the FNO's pointwise
layers (lifting, projection, channel MLPs, skips) run in the 16-bit format,
while each spectral convolution runs in fp32 from its FFT to its inverse:
cuFFT has no bf16 transform, takes fp16 only on power-of-two sizes, and the
contraction with the complex weights would otherwise mix complex32 and
complex64.

The spectral contraction: neuraloperator contracts the Fourier modes with
the weights through tensorly's einsum, which it points at opt_einsum's
"optimal" path search at import. For two operands there is no path to
choose, yet the search runs in Python at every call (a step of a small FNO
spends a large share of its time there on a CPU), and torch.compile cannot
trace it (a graph break that leaves the whole forward eager). The suite's
layer therefore contracts a dense weight with torch.einsum directly: the
same product, the same weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from neuralop.layers import spectral_convolution
from neuralop.layers.spectral_convolution import SpectralConv
from neuralop.models import FNO
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from caraml.node.dist import Dist
from operator_benchmark.problems import Problem


def _letters(n: int) -> str:
    return "".join(chr(ord("a") + i) for i in range(n))


def dense_contraction(x: torch.Tensor, weight, separable: bool = False) -> torch.Tensor:
    """(batch, in, modes...) x (in, out, modes...) -> (batch, out, modes...),
    summed over `in`, as neuraloperator's dense contraction computes it."""
    if not torch.is_tensor(weight):
        weight = weight.to_tensor()  # tltorch's DenseTensor holds the plain tensor
    modes = _letters(x.ndim + 1)[3:]  # after batch (a), in (b), out (c)
    return torch.einsum(f"ab{modes},bc{modes}->ac{modes}", x, weight)


class FP32SpectralConv(SpectralConv):
    """neuraloperator's SpectralConv with autocast off, its input in fp32
    and a dense weight contracted by torch.einsum."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self._contract is spectral_convolution._contract_dense:
            self._contract = dense_contraction

    def forward(self, x: torch.Tensor, output_shape=None) -> torch.Tensor:
        with torch.autocast(x.device.type, enabled=False):
            return super().forward(x.float(), output_shape)


def build(problem: Problem, device: torch.device) -> nn.Module:
    net = FNO(n_modes=problem.modes, in_channels=problem.in_fields,
              out_channels=problem.out_fields, hidden_channels=problem.width,
              n_layers=problem.layers, conv_module=FP32SpectralConv)
    return net.to(device).train()


def parallelize(net: nn.Module, dist: Dist, compile_mode: str) -> nn.Module:
    """DDP across the ranks (when there are several), then torch.compile of
    the wrapped model in `compile_mode` (none: eager), so the compiler sees
    DDP's gradient buckets."""
    if dist.world_size > 1:
        device_ids = [dist.device.index] if dist.device.type == "cuda" else None
        net = DistributedDataParallel(net, device_ids=device_ids)
    return net if compile_mode == "none" else torch.compile(net, mode=compile_mode)


def loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error in fp32 (the prediction may be 16-bit under AMP)."""
    return F.mse_loss(prediction.float(), target)


def parameter_count(net: nn.Module) -> int:
    # the spectral weights are complex: two real numbers each
    return sum(p.numel() * (2 if p.is_complex() else 1) for p in net.parameters())
