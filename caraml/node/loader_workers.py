"""How many data-loader processes a rank gets. A worker is a process of its
own that needs a core: on a CPU device the training process already uses
every core the rank has, so a worker only takes time from it; beside a GPU
the training process keeps one core for itself and the workers get the
rest, up to AUTO_MOST."""

from __future__ import annotations

import os

AUTO = "auto"
AUTO_MOST = 2


def cores_of_this_rank() -> int:
    """The cores this process may run on, shared with the other ranks of a
    launcher that started them all on one affinity mask: torchrun, which
    sets LOCAL_WORLD_SIZE, also where srun started it as one task of a node
    (the suite's torchrun launcher). Ranks that srun started as tasks of
    their own have no LOCAL_WORLD_SIZE and cores of their own."""
    cores = len(os.sched_getaffinity(0))
    sharing = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, cores // max(1, sharing))


def loader_workers(asked: int | str, device_type: str) -> int:
    """The workers for `--num-workers`: a number as given, or for 'auto' none
    on a CPU device and otherwise the rank's cores less one, at most
    AUTO_MOST."""
    if asked != AUTO:
        return int(asked)
    if device_type == "cpu":
        return 0
    return max(0, min(AUTO_MOST, cores_of_this_rank() - 1))
