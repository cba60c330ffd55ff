"""One training step: forward, backward and update on one batch (the loop
that runs it is the driver core's, caraml/node/driver.py)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from caraml.node import precision
from image_classification import model

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def sgd_step(net: nn.Module, optimizer: torch.optim.Optimizer, precision_name: str,
             device: torch.device) -> Step:
    """Forward, backward and update on one batch; returns the loss (not
    synchronised, so reading it is left to the caller)."""
    scaler = precision.grad_scaler(precision_name, device)

    def step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast(precision_name, device):
            loss = model.loss(net(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    return step
