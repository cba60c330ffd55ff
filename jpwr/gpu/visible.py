"""Which GPUs a job was given. Slurm and launchers restrict a job through
environment variables (CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
HIP_VISIBLE_DEVICES) whose entries are indices, UUIDs or MIG instance ids;
the management libraries ignore them and always list every GPU of the node.

The ROCm runtime applies ROCR_VISIBLE_DEVICES first and then, on what
that left, HIP_VISIBLE_DEVICES, or CUDA_VISIBLE_DEVICES where HIP's own is
unset (hip_visible); NVIDIA's runtime reads CUDA_VISIBLE_DEVICES alone.

The forms the drivers accept: an index; a GPU UUID, whole or abbreviated,
with or without its `GPU-` prefix; a MIG instance as `MIG-<uuid>` or, from
older drivers, `MIG-GPU-<parent uuid>/<gi>/<ci>`. A MIG instance has no
power reading of its own, so it is measured through its parent GPU (once,
however many of its instances the job holds)."""

from __future__ import annotations

import os
from collections.abc import Callable

from jpwr.method import MethodUnavailable


def entries(variable: str) -> list[str] | None:
    """The entries of a visibility variable, None where it is not set."""
    spec = os.environ.get(variable)
    if spec is None:
        return None
    return [e.strip() for e in spec.split(",") if e.strip()]


def _bare(uuid: str) -> str:
    return uuid.lower().removeprefix("mig-").removeprefix("gpu-")


def restrict(candidates: list[int], uuids: list[str], variable: str, method: str,
             mig_parent: Callable[[str], int | None] = lambda _: None) -> list[int]:
    """The entries of `candidates` (indices into `uuids`, in the order the
    runtime counts them) that `variable` keeps. Index entries count within
    `candidates`, so variables can be chained the way the ROCm runtime
    applies ROCR_ then HIP_VISIBLE_DEVICES. `mig_parent` finds the GPU (an
    index into `uuids`) that holds a MIG instance of the given UUID."""
    spec = entries(variable)
    if spec is None:
        return candidates
    said = os.environ.get(variable, "")
    picked: list[int] = []
    for entry in spec:
        if entry.isdigit():
            position = int(entry)
            if position >= len(candidates):
                raise MethodUnavailable(f"{method}: {variable}={said} names device {position}, "
                                        f"but only {len(candidates)} are there")
            found = candidates[position]
        elif entry.upper().startswith("MIG-GPU-"):  # MIG-GPU-<parent uuid>/<gi>/<ci>
            found = _by_uuid(entry[4:].split("/")[0], candidates, uuids, variable, said, method)
        elif entry.upper().startswith("MIG-"):
            parent = mig_parent(_bare(entry))
            if parent is None or parent not in candidates:
                raise MethodUnavailable(f"{method}: {variable}={said}: MIG instance {entry!r} "
                                        f"is on none of the GPUs there")
            found = parent
        else:
            found = _by_uuid(entry, candidates, uuids, variable, said, method)
        if found not in picked:  # MIG instances of one GPU share its reading
            picked.append(found)
    return picked


def _by_uuid(entry: str, candidates: list[int], uuids: list[str], variable: str, said: str,
             method: str) -> int:
    wanted = _bare(entry)
    matches = [c for c in candidates if _bare(uuids[c]).startswith(wanted)]
    if len(matches) != 1:
        raise MethodUnavailable(f"{method}: {variable}={said}: entry {entry!r} matches "
                                f"{len(matches)} of the GPUs' UUIDs, not exactly one")
    return matches[0]


def cuda_order(bus_ids: list[str], names: list[str], method: str) -> list[int]:
    """The management library's indices in the order CUDA counts the GPUs.
    With CUDA_DEVICE_ORDER=PCI_BUS_ID that is the PCI bus order; CUDA's
    default, fastest first, is the same order where all GPUs are of one
    model (ties go by bus id) and cannot be known from here where they are
    not, so index entries are refused there rather than guessed."""
    by_bus = sorted(range(len(bus_ids)), key=lambda i: bus_ids[i].lower())
    ordered = os.environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") == "PCI_BUS_ID"
    if ordered or len(set(names)) <= 1:
        return by_bus
    spec = entries("CUDA_VISIBLE_DEVICES") or []
    if any(e.isdigit() for e in spec):
        raise MethodUnavailable(
            f"{method}: CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']} counts the GPUs "
            f"fastest first, and this node's differ ({', '.join(sorted(set(names)))}), so which "
            f"ones it means is not known; set CUDA_DEVICE_ORDER=PCI_BUS_ID or give their UUIDs")
    return by_bus


# The variables HIP reads, ROCR's applied first; the second is HIP's own,
# else CUDA's, which HIP honours where its own is unset
HIP_VARIABLES = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


def hip_variables() -> tuple[str, ...]:
    """The variables that select a job's AMD GPUs here, in the order HIP applies them."""
    inner = next((v for v in HIP_VARIABLES[1:] if os.environ.get(v) is not None), None)
    return (HIP_VARIABLES[0],) + ((inner,) if inner else ())


def hip_visible(uuids: list[str], method: str) -> list[int]:
    """The library's indices of the AMD GPUs a process sees, in the order
    HIP counts them: ROCR_VISIBLE_DEVICES on all of them, then HIP's (or
    CUDA's) variable on what ROCR's left."""
    picked = list(range(len(uuids)))
    for variable in hip_variables():
        picked = restrict(picked, uuids, variable, method)
    return picked
