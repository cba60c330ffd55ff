"""One training step: forward, backward and update on one batch (the loop
that runs it is the driver core's, caraml/node/driver.py)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from caraml.node import numerics, precision
from image_classification import model

Step = Callable[[torch.Tensor, torch.Tensor], numerics.Stepped]


def sgd_step(net: nn.Module, optimizer: torch.optim.Optimizer, precision_name: str,
             device: torch.device) -> Step:
    """Forward, backward and update on one batch; returns the loss (not
    synchronised, so reading it is left to the caller) and whether the
    scaler skipped the update."""
    scaler = precision.grad_scaler(precision_name, device)

    def step(images: torch.Tensor, labels: torch.Tensor) -> numerics.Stepped:
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast(precision_name, device):
            loss = model.loss(net(images), labels)
        scaler.scale(loss).backward()
        return numerics.Stepped(loss.detach(), numerics.scaled_update(scaler, optimizer))

    return step
