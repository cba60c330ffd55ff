"""Training batches as endless iterators of (images, labels) on the device.
Each next() includes the host-to-device copy, so that copy is part of the
timed step, as it is in a real training run."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets
from torchvision.transforms import v2

from caraml.node.dist import Dist
from caraml.node.memory import GIB, capacity_bytes
from caraml.report import BenchmarkInputError

Batch = tuple[torch.Tensor, torch.Tensor]

# Distinct random batches made once on the host and then cycled through.
SYNTHETIC_POOL = 4
# The share of the host's memory the pools of a node's ranks may take: the
# rest is for the processes themselves, the CUDA context's pinned staging
# and the OS. At a batch size that no device can take, the pool would
# otherwise exhaust the host (4 x 39.5 GB at 65,536 224x224 images) before
# the device reports its own out-of-memory error.
POOL_HOST_FRACTION = 0.25
# ImageNet's per-channel statistics, the usual normalisation for these models.
_MEAN = (0.485, 0.456, 0.406)
_STD = (0.229, 0.224, 0.225)


def _to_device(batch: Batch, device: torch.device, channels_last: bool) -> Batch:
    images, labels = batch
    layout = torch.channels_last if channels_last else torch.preserve_format
    # non_blocking overlaps the copy only from pinned memory, which both
    # sources use on a GPU.
    return (images.to(device, non_blocking=True, memory_format=layout),
            labels.to(device, non_blocking=True))


def synthetic(batch_size: int, image_size: int, num_classes: int, device: torch.device,
              channels_last: bool, seed: int, ranks_per_host: int = 1,
              host_bytes: int | None = None) -> Iterator[Batch]:
    """Random images and labels, made now (outside any timing), then copied
    to the device one batch per next(). The pool holds as many of the
    SYNTHETIC_POOL batches as this rank's share of the host's memory
    (host_bytes, by default the host's own) takes, at least one."""
    host = capacity_bytes(torch.device("cpu")) if host_bytes is None else host_bytes
    share = POOL_HOST_FRACTION * host / ranks_per_host
    batch_bytes = batch_size * (3 * image_size * image_size * 4 + 8)  # fp32 images, int64 labels
    if batch_bytes > share:
        raise BenchmarkInputError(
            f"synthetic data: one batch of {batch_size} {image_size}x{image_size} images takes "
            f"{batch_bytes / GIB:.1f} GiB of host memory, more than this rank's share "
            f"({share / GIB:.1f} GiB, {POOL_HOST_FRACTION:.0%} of the host's {host / GIB:.0f} GiB "
            f"over {ranks_per_host} rank(s)); lower the global batch size or use more devices")
    generator = torch.Generator().manual_seed(seed)
    pin = device.type == "cuda"
    # the layout the model asks for, made once: a step then copies the batch
    # as it is (on a CPU device: takes it as it is) instead of converting it
    layout = torch.channels_last if channels_last else torch.contiguous_format
    pool = []
    for _ in range(min(SYNTHETIC_POOL, int(share // batch_bytes))):
        images = torch.randn(batch_size, 3, image_size, image_size, generator=generator)
        images = images.contiguous(memory_format=layout)
        labels = torch.randint(num_classes, (batch_size,), generator=generator)
        pool.append((images.pin_memory(), labels.pin_memory()) if pin else (images, labels))
    return (_to_device(b, device, channels_last) for b in itertools.cycle(pool))


class UnreadableImage(BenchmarkInputError):
    """An image file that does not decode. Raised in a DataLoader worker, it
    reaches the main process as this class again, its message wrapped in
    the worker's traceback; `one_line` takes the message back out."""

    def one_line(self) -> str:
        last = str(self).strip().splitlines()[-1]
        return last.split(f"{type(self).__name__}: ", 1)[-1]


def _load_image(path: str):
    try:
        return datasets.folder.default_loader(path)
    except (OSError, ValueError) as e:  # PIL's UnidentifiedImageError is an OSError
        raise UnreadableImage(f"image {path} cannot be decoded ({e}); "
                              "remove or replace it") from None


def image_folder(root: str, batch_size: int, image_size: int, num_classes: int,
                 num_workers: int, dist: Dist, channels_last: bool, seed: int) -> Iterator[Batch]:
    """Decoded and augmented images from an ImageFolder tree, each rank
    reading its own share (DistributedSampler), epoch after epoch."""
    transform = v2.Compose([
        v2.ToImage(),
        v2.RandomResizedCrop(image_size, antialias=True),
        v2.RandomHorizontalFlip(),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(_MEAN, _STD),
    ])
    try:
        dataset = datasets.ImageFolder(root, transform=transform, loader=_load_image)
    except FileNotFoundError as e:  # no class folders, or no images in them
        raise BenchmarkInputError(f"data path {root}: {e}") from None
    if len(dataset.classes) > num_classes:
        raise BenchmarkInputError(
            f"data path {root} has {len(dataset.classes)} classes, more than "
            f"--num-classes {num_classes}")
    global_batch = batch_size * dist.world_size
    if len(dataset) < global_batch:
        raise BenchmarkInputError(
            f"data path {root} has {len(dataset)} images, fewer than one global batch "
            f"({global_batch})")
    sampler = DistributedSampler(dataset, num_replicas=dist.world_size, rank=dist.rank,
                                 shuffle=True, seed=seed, drop_last=True)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True,
                        num_workers=num_workers, persistent_workers=num_workers > 0,
                        pin_memory=dist.device.type == "cuda")

    def epochs() -> Iterator[Batch]:
        for epoch in itertools.count():
            sampler.set_epoch(epoch)
            try:
                for batch in loader:
                    yield _to_device(batch, dist.device, channels_last)
            except UnreadableImage as e:
                raise BenchmarkInputError(e.one_line()) from None

    return epochs()
