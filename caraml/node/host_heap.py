"""The host's heap, where a CPU device's tensors live. glibc adjusts two
thresholds as a process runs: blocks above the first are mapped on their
own and go back to the kernel when freed, and a free top of the heap above
the second is given back. Early in a run both are small, so an iteration
gives back what it freed and the next takes it again, page fault by page
fault, the kernel zeroing every page; how long that lasts differs from
process to process. In four pairs of the LLM's cpu-small runs of 23
iterations: 650,000 to 754,000 minor faults and 0.42 to 0.70 s per
iteration, against 212,000 to 217,000 faults and 0.39 to 0.58 s with the
thresholds fixed (docs/results.md, "Each benchmark as it runs").

keep_freed fixes them once per process, when a rank's device is chosen
(caraml/node/dist.py): blocks up to 32 MiB (the most glibc's own
adjustment reaches) come from the heap, and its free top is kept up to
1 GiB."""

from __future__ import annotations

import ctypes

# mallopt's parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
HEAP_BLOCKS_UP_TO = 32 * 2**20
FREE_TOP_KEPT_UP_TO = 2**30


def keep_freed() -> bool:
    """True where the setting took; False where the C library has no
    mallopt (not glibc)."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, HEAP_BLOCKS_UP_TO)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, FREE_TOP_KEPT_UP_TO))
