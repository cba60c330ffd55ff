"""The ranks' meeting at start-up, with a deadline: a rank that never comes
(stopped, stuck in an import, its node lost) must not leave the others
waiting in silence for the process group's default timeout (30 minutes for
gloo, 10 for NCCL).

Every rank writes its arrival (rank -> host) into the launcher's store
(torchrun's, or rank 0's for one Slurm task per device) and waits for all
others' before the process group is made; then each says it has joined the
group and waits for all others' before the first collective. Past the
deadline every rank that came raises StartupTimeout, whose one line names
the ranks that did not come and, where another rank of their node came,
the node. A rank that did not come but runs on this node (stopped, stuck
in an import) is ended there and then by the ranks that came: the
launcher would give it its own grace first (torchrun's 30 s, for a
process that a stop keeps from ever taking its TERM), and the job would
end that long after the deadline."""

from __future__ import annotations

import os
import signal
import socket
from datetime import timedelta
from pathlib import Path

import torch.distributed as tdist

_PREFIX = "caraml/startup"


class StartupTimeout(RuntimeError):
    pass


def store(rank: int, world: int, timeout_s: float) -> tdist.Store:
    """The store the launcher set up: torchrun's agent holds one (its
    workers connect to it), else rank 0 serves it (one Slurm task per
    device). Rank 0 does not wait for the others to connect: arrive() names
    who did not."""
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    timeout = timedelta(seconds=timeout_s)
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == str(True):
        return tdist.TCPStore(host, port, world, is_master=False, timeout=timeout)
    return tdist.TCPStore(host, port, world, is_master=rank == 0, timeout=timeout,
                          wait_for_workers=False, multi_tenant=True)


def _keys(stage: str, world: int) -> list[str]:
    # a restarted torchrun reuses its store: each attempt has keys of its own
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return [f"{_PREFIX}/{attempt}/{stage}/{rank}" for rank in range(world)]


def meet(kv: tdist.Store, stage: str, rank: int, world: int, local_world: int,
         timeout_s: float, what: str) -> None:
    """Says this rank is at `stage` and waits for every other rank there;
    StartupTimeout past the deadline."""
    keys = _keys(stage, world)
    kv.set(keys[rank], socket.gethostname())
    try:
        kv.wait(keys, timedelta(seconds=timeout_s))
    except (RuntimeError, tdist.DistError):  # the store's timeout
        said = absent(kv, keys, local_world, timeout_s, what)
        end_here({r for r, key in enumerate(keys) if not kv.check([key])})
        raise StartupTimeout(said) from None


def absent(kv: tdist.Store, keys: list[str], local_world: int, timeout_s: float, what: str) -> str:
    """The line that names the ranks whose key is not there."""
    hosts = {rank: kv.get(key).decode(errors="replace") for rank, key in enumerate(keys)
             if kv.check([key])}
    missing = [rank for rank in range(len(keys)) if rank not in hosts]
    named = []
    for rank in missing:
        # torchrun and Slurm number the ranks of a node one after another
        node = range(rank - rank % local_world, rank - rank % local_world + local_world)
        beside = sorted({hosts[r] for r in node if r in hosts})
        named.append(f"rank {rank}" + (f" (on {beside[0]})" if beside else ""))
    # no commas: the line is a cell of JUBE's tables
    return (f"{' and '.join(named) or 'a rank'} of {len(keys)} did not {what} within "
            f"{timeout_s:g} s (--startup-timeout-s): stopped or stuck or gone (or its node never "
            f"started it); the ranks that came stop here")


# the variables that give a launched process its global rank: torchrun's, Slurm's task's
RANK_VARIABLES = (b"RANK=", b"SLURM_PROCID=")


def _rank_of(pid: int) -> int | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # gone, or another user's
        return None
    for prefix in RANK_VARIABLES:
        found = next((entry[len(prefix):] for entry in environ if entry.startswith(prefix)), None)
        if found is not None and found.isdigit():
            return int(found)
    return None


def end_here(missing: set[int]) -> list[int]:
    """Kills the processes of the ranks in `missing` that the launcher of
    this one started on this node (this process's siblings); their pids.
    SIGKILL: a stopped process keeps a TERM pending for ever, a stuck one
    may never act on it."""
    killed = []
    for task in Path(f"/proc/{os.getppid()}/task").glob("*"):
        try:
            siblings = [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
        for pid in siblings:
            if pid != os.getpid() and _rank_of(pid) in missing:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except OSError:
                    pass  # gone since, or not ours
    return killed
