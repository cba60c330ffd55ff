"""The synthetic image pool within the host's memory: at a batch size no
GPU can take, the pool used to fill the host (4 pinned batches of 39.5 GB at
65,536 images) before the device could report out of memory. The host's
size is the one input faked (host_bytes); the pools are real tensors."""

from __future__ import annotations

import itertools

import pytest
import torch

from caraml.node.memory import GIB
from caraml.report import BenchmarkInputError
from image_classification import data

CPU = torch.device("cpu")
BATCH_BYTES = 2 * (3 * 8 * 8 * 4 + 8)  # two 8x8 images and their labels


def pool_size(host_bytes: int, ranks_per_host: int = 1) -> int:
    """Distinct batches the iterator cycles through (on a CPU a batch is
    the pool's own tensor)."""
    batches = data.synthetic(2, 8, 10, CPU, channels_last=False, seed=1,
                             ranks_per_host=ranks_per_host, host_bytes=host_bytes)
    return len({id(images) for images, _ in itertools.islice(batches, 2 * data.SYNTHETIC_POOL)})


def test_the_pool_takes_at_most_its_share_of_the_host():
    per_batch = int(BATCH_BYTES / data.POOL_HOST_FRACTION)  # host bytes whose share is one batch
    assert pool_size(100 * per_batch) == data.SYNTHETIC_POOL
    assert pool_size(2 * per_batch) == 2
    assert pool_size(per_batch) == 1
    # four ranks on the host share it
    assert pool_size(8 * per_batch, ranks_per_host=4) == 2


def test_a_batch_beyond_the_hosts_share_is_refused_before_any_is_made():
    # 65,536 ResNet images of 224x224 on a 128 GiB node: 39.5 GB per batch
    with pytest.raises(BenchmarkInputError) as err:
        data.synthetic(65536, 224, 1000, torch.device("cuda", 0), channels_last=True, seed=1,
                       host_bytes=128 * GIB)
    assert str(err.value) == (
        "synthetic data: one batch of 65536 224x224 images takes 36.8 GiB of host memory, more "
        "than this rank's share (32.0 GiB, 25% of the host's 128 GiB over 1 rank(s)); lower the "
        "global batch size or use more devices")


@pytest.mark.parametrize("device_gb", [80, 96, 141, 192])
def test_the_gpu_oom_tests_batch_fits_a_128_gib_host(device_gb):
    """tests/gpu's out-of-memory test asks a batch whose whole pool fits the
    host of a 128 GiB GPU node, so the device fails first."""
    from tests.gpu.test_gpu_drivers import OOM_IMAGE_SIZE, oom_batch

    batch = oom_batch(device_gb * 10**9)
    batch_bytes = batch * (3 * OOM_IMAGE_SIZE ** 2 * 4 + 8)
    assert batch_bytes * data.SYNTHETIC_POOL <= data.POOL_HOST_FRACTION * 128 * GIB
