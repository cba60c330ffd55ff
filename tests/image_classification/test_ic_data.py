"""Synthetic host batches and ImageFolder batches."""

import itertools

import pytest
import torch

from caraml.report import BenchmarkInputError
from image_classification import data

CPU = torch.device("cpu")


def take(batches, n):
    return list(itertools.islice(batches, n))


def test_synthetic_batches_have_the_asked_shape_and_labels():
    images, labels = next(data.synthetic(5, 16, num_classes=3, device=CPU,
                                         channels_last=False, seed=1))
    assert images.shape == (5, 3, 16, 16) and images.dtype == torch.float32
    assert labels.shape == (5,) and labels.dtype == torch.int64
    assert 0 <= labels.min() and labels.max() < 3


def test_synthetic_pool_is_made_once_and_cycled():
    batches = take(data.synthetic(2, 8, 10, CPU, channels_last=False, seed=1),
                   data.SYNTHETIC_POOL + 1)
    assert not torch.equal(batches[0][0], batches[1][0])
    assert torch.equal(batches[0][0], batches[data.SYNTHETIC_POOL][0])


def test_synthetic_data_depends_on_the_seed():
    a = next(data.synthetic(2, 8, 10, CPU, channels_last=False, seed=1))[0]
    b = next(data.synthetic(2, 8, 10, CPU, channels_last=False, seed=2))[0]
    assert not torch.equal(a, b)


def test_channels_last_batches():
    images, _ = next(data.synthetic(2, 8, 10, CPU, channels_last=True, seed=1))
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert not images.is_contiguous()


def folder_batches(folder, single_cpu, batch_size=2, num_classes=2):
    return data.image_folder(str(folder), batch_size, image_size=16, num_classes=num_classes,
                             num_workers=0, dist=single_cpu, channels_last=False, seed=0)


def test_image_folder_batches_are_cropped_normalised_and_go_on_past_an_epoch(
        folder, single_cpu):
    batches = take(folder_batches(folder, single_cpu), 7)  # 3 batches per epoch
    images, labels = batches[-1]
    assert images.shape == (2, 3, 16, 16) and images.dtype == torch.float32
    assert set(torch.cat([b[1] for b in batches]).tolist()) == {0, 1}
    # A pure red image, normalised with ImageNet statistics, has a positive
    # red and a negative blue channel.
    red = torch.cat([b[0][b[1] == 0] for b in batches])
    assert (red[:, 0] > 0).all() and (red[:, 2] < 0).all()


def test_more_classes_than_the_model_has_is_an_error(folder, single_cpu):
    with pytest.raises(BenchmarkInputError, match="has 2 classes, more than --num-classes 1"):
        folder_batches(folder, single_cpu, num_classes=1)


def test_fewer_images_than_a_global_batch_is_an_error(folder, single_cpu):
    with pytest.raises(BenchmarkInputError, match="has 6 images, fewer than one global batch"):
        folder_batches(folder, single_cpu, batch_size=8)


def test_a_folder_without_class_folders_is_an_error(tmp_path, single_cpu):
    with pytest.raises(BenchmarkInputError, match=f"data path {tmp_path}"):
        folder_batches(tmp_path, single_cpu)
