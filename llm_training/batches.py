"""Micro-batches for one data-parallel rank. Every rank of a model-parallel
group (tensor and pipeline ranks of one replica) reads the same samples;
different replicas read disjoint ones."""

from __future__ import annotations

import atexit
import itertools
import signal
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from caraml.node.stopping import STOP_SIGNALS


def _leave_stop_signals_to_the_trainer(_worker_id: int) -> None:
    # Slurm and terminals signal every process of a job or process group; a
    # worker killed by SIGTERM would crash the training process's next batch
    # instead of letting it stop cleanly (and then end its workers itself).
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def micro_batches(dataset: Dataset, *, micro_batch_size: int, data_parallel: int,
                  data_parallel_rank: int, num_workers: int,
                  device: torch.device) -> Iterator[dict[str, torch.Tensor]]:
    """Yields {"tokens", "labels", "loss_mask"} on `device`, the dataset over
    and over: the driver sizes it to the run's planned iterations, and a
    measurement window (--min-timed-seconds) goes on past them with the
    same samples again, as the image and operator benchmarks cycle theirs."""
    batches = _loaded(dataset, micro_batch_size=micro_batch_size, data_parallel=data_parallel,
                      data_parallel_rank=data_parallel_rank, num_workers=num_workers,
                      device=device)
    # A run that ends in an exception leaves the batches to the traceback
    # the interpreter keeps until its exit, where multiprocessing ends the
    # workers with TERM, which they ignore, and waits for them for ever.
    # Closed first (atexit runs the last registered first), they end the
    # workers themselves.
    atexit.register(batches.close)
    return batches


def _loaded(dataset: Dataset, *, micro_batch_size: int, data_parallel: int,
            data_parallel_rank: int, num_workers: int,
            device: torch.device) -> Iterator[dict[str, torch.Tensor]]:
    sampler = DistributedSampler(dataset, num_replicas=data_parallel, rank=data_parallel_rank,
                                 shuffle=False, drop_last=True)
    loader = DataLoader(dataset, batch_size=micro_batch_size, sampler=sampler, drop_last=True,
                        num_workers=num_workers, pin_memory=device.type == "cuda",
                        persistent_workers=num_workers > 0,
                        worker_init_fn=_leave_stop_signals_to_the_trainer)
    for _epoch in itertools.count():
        for batch in loader:
            yield {k: v.to(device, non_blocking=True) for k, v in batch.items()}
