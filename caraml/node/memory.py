"""Device memory of a training run, for the summary line and for an
out-of-memory failure: the fullest device decides whether a layout fits, so
the job reports the maximum over its ranks.

On a GPU the figures are torch's caching allocator's peaks (allocated by
tensors, reserved from the device) and the device's capacity; on a CPU the
process's peak resident memory stands for both peaks, and the host's memory
for the capacity. The peaks count from the end of the warm-up (reset_peak):
cuDNN's algorithm search and the first steps' one-off buffers are not the
footprint of training."""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator

import torch

from caraml.node.dist import Dist
from caraml.report import BenchmarkInputError

GIB = 2**30


def capacity_bytes(device: torch.device) -> int:
    """A GPU's memory, or the host's for a CPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def reset_peak(device: torch.device) -> None:
    """Starts the peaks anew. On a CPU through Linux's clear_refs (5 resets
    the peak resident set); where that file cannot be written the peak
    stays the one since the process started."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _this_rank(device: torch.device) -> list[float]:
    if device.type == "cuda":
        return [torch.cuda.max_memory_allocated(device) / GIB,
                torch.cuda.max_memory_reserved(device) / GIB,
                capacity_bytes(device) / GIB]
    # ru_maxrss is in KiB on Linux
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
    return [rss, rss, capacity_bytes(device) / GIB]


def peak(dist: Dist) -> dict[str, float]:
    """The summary's memory fields: the largest peak of any rank, and the
    capacity of one device. A collective: every rank calls it."""
    ranks = dist.gather_floats(_this_rank(dist.device))
    return {
        "memory_max_allocated_gib": max(r[0] for r in ranks),
        "memory_max_reserved_gib": max(r[1] for r in ranks),
        "memory_device_gib": min(r[2] for r in ranks),
    }


def out_of_memory(samples_per_device: int, device: torch.device, what_to_lower: str) -> str:
    """The one line a failed row shows when a device ran out of memory."""
    capacity = f" of {capacity_bytes(device) / GIB:.0f} GiB" if device.type == "cuda" else ""
    return (f"out of memory at {samples_per_device} samples per device on "
            f"{device.type}{capacity}: {what_to_lower}")


# torch's CPU allocator raises a plain RuntimeError where a device's raises OutOfMemoryError
_CPU_ALLOCATOR = "DefaultCPUAllocator: can't allocate memory"


def is_out_of_memory(err: BaseException) -> bool:
    """A device's allocator, or the CPU's, could not give the memory asked for."""
    return isinstance(err, torch.OutOfMemoryError) or (
        isinstance(err, RuntimeError) and _CPU_ALLOCATOR in str(err))


@contextlib.contextmanager
def out_of_memory_is_input(samples_per_device: int, device: torch.device,
                           what_to_lower: str) -> Iterator[None]:
    """Out of memory in the block, on a device or the CPU, as the one-line
    input error the failed row shows (out_of_memory)."""
    try:
        yield
    except RuntimeError as err:  # torch.OutOfMemoryError is one
        if not is_out_of_memory(err):
            raise
        raise BenchmarkInputError(out_of_memory(samples_per_device, device, what_to_lower)) from None
