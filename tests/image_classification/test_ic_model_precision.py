"""Model building, the loss over auxiliary heads, and what each precision
sets."""

from collections import namedtuple

import pytest
import torch
import torch.nn.functional as F

from caraml.node import precision
from caraml.report import BenchmarkInputError
from image_classification import model

CPU = torch.device("cpu")


def test_build_gives_a_fresh_model_in_training_mode_with_the_asked_classes():
    net = model.build("resnet18", num_classes=7, device=CPU, channels_last=True)
    assert net.training
    assert net.fc.out_features == 7
    assert net.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    assert model.parameter_count(net) == sum(p.numel() for p in net.parameters()) > 1e7


def test_loss_adds_the_auxiliary_heads():
    Outputs = namedtuple("Outputs", "logits aux_logits2 aux_logits1")
    labels = torch.tensor([0, 2])
    main, aux = torch.randn(2, 3), torch.randn(2, 3)
    expected = F.cross_entropy(main, labels) + F.cross_entropy(aux, labels)
    assert torch.allclose(model.loss(Outputs(main, aux, None), labels), expected)
    assert torch.allclose(model.loss(main, labels), F.cross_entropy(main, labels))


@pytest.mark.parametrize("name, dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_autocast_computes_in_the_precision_asked(name, dtype):
    a = torch.randn(4, 4)
    with precision.autocast(name, CPU):
        assert (a @ a).dtype == dtype


@pytest.mark.parametrize("name, scaled", [("fp16", True), ("bf16", False), ("fp32", False)])
def test_only_fp16_scales_the_loss(name, scaled):
    assert precision.grad_scaler(name, CPU).is_enabled() == scaled


@pytest.mark.parametrize("name, size, named", [
    ("vit_b_16", 32, "Wrong image height"),   # ViT takes exactly its configured size
    ("alexnet", 32, "Output size is too small"),
])
def test_an_image_size_the_model_cannot_take_is_bad_input(name, size, named):
    net = model.build(name, num_classes=10, device=CPU, channels_last=False)
    with pytest.raises(BenchmarkInputError, match=f"model {name} does not take "
                                                  f"{size}x{size} images: .*{named}"):
        model.check_trainable(net, name, size, 2, CPU)
    assert net.training


def test_one_image_per_device_that_batch_norm_cannot_train_on_is_bad_input():
    net = model.build("resnet18", num_classes=10, device=CPU, channels_last=False)
    with pytest.raises(BenchmarkInputError, match="model resnet18 cannot train on one 32x32 image "
                                                  "per device .*more than 1 value per channel"):
        model.check_trainable(net, "resnet18", 32, 1, CPU)
    # At 224x224 the last batch norm still sees 7x7 values per channel.
    model.check_trainable(net, "resnet18", 224, 1, CPU)


def test_an_input_the_model_takes_passes_and_leaves_it_training_unchanged():
    net = model.build("resnet18", num_classes=10, device=CPU, channels_last=False)
    bn = net.bn1.running_mean.clone()
    model.check_trainable(net, "resnet18", 224, 1, CPU)
    assert net.training and torch.equal(bn, net.bn1.running_mean)
