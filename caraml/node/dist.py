"""Distributed set-up from the launcher's environment (torchrun, torchrun-jsc
or one Slurm task per device), and the device each rank trains on (on a
CPU, with the host's heap set up for training: caraml/node/host_heap.py)."""

from __future__ import annotations

import gc
import os
import re
import socket
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as tdist

from caraml.node import host_heap, startup
from caraml.node.options import STARTUP_TIMEOUT_S


@dataclass(frozen=True)
class Dist:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    device: torch.device
    backend: str  # of the process group: nccl on GPUs (RCCL on ROCm), gloo on CPUs

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def hostname(self) -> str:
        return socket.gethostname()

    def sync(self) -> None:
        """Waits for the device's queued work, so a timer read is honest."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def any_rank(self, flag: bool) -> bool:
        """True on every rank if it is True on any; keeps ranks in step when one must stop."""
        t = torch.tensor([1.0 if flag else 0.0], device=self.device)
        tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
        return bool(t.item())

    def gather_floats(self, values: list[float]) -> list[list[float]]:
        """Every rank's list of floats, on every rank (same length on all)."""
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        out = [torch.empty_like(t) for _ in range(self.world_size)]
        tdist.all_gather(out, t)
        return [o.tolist() for o in out]

    def gather_objects(self, value: object) -> list:
        """Every rank's (picklable) value, on every rank."""
        values = [None] * self.world_size
        tdist.all_gather_object(values, value)
        return values

    def barrier(self) -> None:
        tdist.barrier()

    def close(self) -> None:
        """Leaves the process group. A DDP model can sit in a reference cycle
        (whether one forms depends on what has been imported), and then it
        outlives its last name until the garbage collector runs; its reducer
        must let go of the group first, or gloo can deadlock or abort the
        process at teardown (torch 2.13)."""
        if tdist.is_initialized():
            gc.collect()
            tdist.destroy_process_group()


def _env_int(*names: str, default: int) -> int:
    # Slurm writes some counts per node as e.g. "4(x2)": the leading number counts
    for name in names:
        match = re.match(r"\d+", os.environ.get(name, ""))
        if match:
            return int(match.group())
    return default


def init(device: str = "auto", startup_timeout_s: float = STARTUP_TIMEOUT_S) -> Dist:
    """Joins the launcher's process group (or makes one for a single process)
    and picks this rank's device: `auto` takes the GPU (CUDA or ROCm) of the
    local rank when there is one, else the CPU. Every rank must come within
    startup_timeout_s, to the group and its first collective, or every rank
    that came raises startup.StartupTimeout naming the ones that did not."""
    # torchrun sets RANK/WORLD_SIZE/LOCAL_RANK; with one Slurm task per device
    # (srun without torchrun) only the SLURM_* variables exist.
    rank = _env_int("RANK", "SLURM_PROCID", default=0)
    world = _env_int("WORLD_SIZE", "SLURM_NTASKS", default=1)
    local_rank = _env_int("LOCAL_RANK", "SLURM_LOCALID", default=0)
    local_world = _env_int("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", default=1)

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' requested but torch sees no GPU")
        dev = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    elif device == "cpu":
        dev = torch.device("cpu")
        host_heap.keep_freed()
    else:
        raise ValueError(f"unknown device {device!r}; use auto, cuda or cpu")

    # Always a process group, one process too (as torchtitan does): megatron-core's
    # parallel state and every collective the drivers use need one, and a
    # single-GPU run must take the same path as a multi-GPU one.
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if world > 1 and "MASTER_ADDR" not in os.environ:
        raise RuntimeError(f"{world} processes but no MASTER_ADDR to meet at; "
                           "start them with torchrun or srun from the suite's job script")
    if "MASTER_ADDR" in os.environ:
        os.environ.setdefault("RANK", str(rank))
        os.environ.setdefault("WORLD_SIZE", str(world))
        made = Dist(rank, world, local_rank, local_world, dev, backend)
        _join(made, startup_timeout_s)
        return made
    # A plain `python -m ...`: no launcher, no rendezvous address; an
    # in-process store is all one rank needs.
    tdist.init_process_group(backend=backend, store=tdist.HashStore(), rank=0, world_size=1)
    return Dist(rank, world, local_rank, local_world, dev, backend)


def _join(d: Dist, timeout_s: float) -> None:
    """The process group with a start-up deadline (caraml/node/startup.py): every
    rank at the store, in the group and through its first collective, or
    StartupTimeout. The group's own timeout is the default again after."""
    try:
        kv = startup.store(d.rank, d.world_size, timeout_s)
    except (RuntimeError, tdist.DistError) as err:  # the store's host (rank 0) never served it
        raise startup.StartupTimeout(
            f"rank {d.rank} found no start-up store at {os.environ['MASTER_ADDR']}:"
            f"{os.environ['MASTER_PORT']} within {timeout_s:g} s (--startup-timeout-s): rank 0 "
            f"did not come or cannot be reached ({str(err).splitlines()[0]})") from None
    startup.meet(kv, "arrived", d.rank, d.world_size, d.local_world_size, timeout_s, "come")
    deadline = timedelta(seconds=timeout_s)
    try:
        tdist.init_process_group(backend=d.backend, store=kv, rank=d.rank, world_size=d.world_size,
                                 timeout=deadline)
        startup.meet(kv, "joined", d.rank, d.world_size, d.local_world_size, timeout_s,
                     "join the process group")
        d.any_rank(False)  # the first collective, within the deadline too
    except (RuntimeError, tdist.DistError) as err:
        if isinstance(err, startup.StartupTimeout):
            raise
        raise startup.StartupTimeout(
            f"the process group did not form within {timeout_s:g} s (--startup-timeout-s): "
            f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    c10d = tdist.distributed_c10d
    if hasattr(c10d, "_set_pg_timeout") and hasattr(c10d, "_get_default_timeout"):  # torch 2.3 on
        # training's own collectives may wait as long as torch lets them (a rank still compiling)
        c10d._set_pg_timeout(c10d._get_default_timeout(c10d.Backend(d.backend)))
