"""The network: a torchvision classification model built by name with random
weights, laid out for the device, wrapped for data parallelism and
optionally compiled; and the loss it trains on."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from caraml.node import memory
from caraml.node.dist import Dist
from caraml.report import BenchmarkInputError


def names() -> list[str]:
    """The classification models torchvision can build (no detection,
    segmentation, video or quantized ones)."""
    return torchvision.models.list_models(module=torchvision.models)


def build(name: str, num_classes: int, device: torch.device, channels_last: bool) -> nn.Module:
    net = torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    return net.to(device=device, memory_format=memory_format).train()


def check_trainable(net: nn.Module, name: str, image_size: int, batch_size: int,
                    device: torch.device) -> None:
    """Passes zeros through the model before training. Some architectures fix
    or bound their input size (ViT, MaxViT, Inception v3, ...), and batch
    normalisation cannot train on a single value per channel (one image per
    device, pooled to 1x1). Either is bad input to report now, not a crash in
    the first iteration. The running statistics are left as they were."""
    buffers = [b.clone() for b in net.buffers()]
    try:
        with torch.no_grad():
            net.eval()
            _probe(net, name, image_size, device, f"does not take {image_size}x{image_size} images")
            if batch_size == 1:
                net.train()
                _probe(net, name, image_size, device,
                       f"cannot train on one {image_size}x{image_size} image per device "
                       "(raise the global batch size)")
    finally:
        net.train()
        with torch.no_grad():
            for b, saved in zip(net.buffers(), buffers):
                b.copy_(saved)


def _probe(net: nn.Module, name: str, image_size: int, device: torch.device, problem: str) -> None:
    try:
        net(torch.zeros(1, 3, image_size, image_size, device=device))
    except (RuntimeError, ValueError, AssertionError) as e:
        if memory.is_out_of_memory(e):  # a memory problem, not the model's (the driver names it)
            raise
        raise BenchmarkInputError(f"model {name} {problem}: {e}") from None


def parallelize(net: nn.Module, dist: Dist, compile: bool) -> nn.Module:
    """DDP across the ranks (when there are several: one rank has nothing to
    synchronise and DDP would only add its bucketing), then torch.compile of
    the wrapped model, so the compiler sees DDP's gradient buckets."""
    if dist.world_size > 1:
        device_ids = [dist.device.index] if dist.device.type == "cuda" else None
        net = DistributedDataParallel(net, device_ids=device_ids)
    return torch.compile(net) if compile else net


def loss(output, labels: torch.Tensor) -> torch.Tensor:
    # Inception v3 and GoogLeNet return auxiliary heads in training mode. Their
    # losses are added, so the step costs what training these models costs and
    # every parameter gets a gradient (DDP waits for all of them).
    heads = [output] if isinstance(output, torch.Tensor) else [h for h in output if h is not None]
    return sum(F.cross_entropy(h, labels) for h in heads)


def parameter_count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())
