"""One training step of the image benchmark (the loop is the driver core's)."""

import pytest
import torch

from image_classification import train


@pytest.mark.parametrize("precision_name", ["fp32", "bf16"])
def test_sgd_step_updates_the_weights_and_returns_the_loss(precision_name):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    before = net[1].weight.detach().clone()
    step = train.sgd_step(net, torch.optim.SGD(net.parameters(), lr=0.1), precision_name,
                          torch.device("cpu"))
    images, labels = torch.randn(4, 3, 2, 2), torch.tensor([0, 1, 2, 0])
    loss, skipped = step(images, labels)
    expected = torch.nn.functional.cross_entropy(net(images), labels)  # after the update
    assert loss.dim() == 0 and torch.isfinite(loss) and not loss.requires_grad
    assert not torch.equal(before, net[1].weight) and skipped is False
    assert expected.item() < loss.item()
