"""Which GPUs a job was given. Slurm and launchers restrict a job through
environment variables (CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES,
HIP_VISIBLE_DEVICES) whose entries are indices or UUIDs; the management
libraries ignore them and always list every GPU of the node."""

from __future__ import annotations

import os

from jpwr.method import MethodUnavailable


def restrict(candidates: list[int], uuids: list[str], variable: str, method: str) -> list[int]:
    """The entries of `candidates` (indices into `uuids`) that `variable`
    keeps. Index entries count within `candidates`, so variables can be
    chained the way the ROCm runtime applies ROCR_ then HIP_VISIBLE_DEVICES.
    UUID entries may be abbreviated, as CUDA allows."""
    spec = os.environ.get(variable)
    if spec is None:
        return candidates
    picked = []
    for entry in (e.strip() for e in spec.split(",")):
        if not entry:
            continue
        if entry.isdigit():
            position = int(entry)
            if position >= len(candidates):
                raise MethodUnavailable(f"{method}: {variable}={spec} names device {position}, "
                                        f"but only {len(candidates)} are there")
            picked.append(candidates[position])
            continue
        wanted = entry.lower().removeprefix("gpu-")
        matches = [c for c in candidates
                   if uuids[c].lower().removeprefix("gpu-").startswith(wanted)]
        if len(matches) != 1:
            raise MethodUnavailable(f"{method}: {variable}={spec}: entry {entry!r} matches "
                                    f"{len(matches)} of the GPUs' UUIDs, not exactly one")
        picked.append(matches[0])
    return picked
