"""Which channels count into a total. Some channels contain others: the GH
module rail includes the Hopper GPU that pynvml reports, RAPL core is inside
RAPL package, psys contains the packages. Per host, the first of these tiers
that has a channel counts, and everything else is reported but not counted:

  1. accelerators: every channel of pynvml, rocm, gc
  2. Grace-Hopper module rails: gh module-<socket>
  3. accelerators as the node's meter sees them: pm_counters accel<N>
  4. the whole node: pm_counters node
  5. CPU sockets and memory: rapl package-<N> and .../dram
  6. hwmon: every power*_input sensor
  7. estimate: the CPU-utilisation model (source "estimated")

So a GH200 node measured with pynvml and gh counts the GPUs, one measured
with gh alone counts the modules, an HPE Cray EX node with pm_counters alone
counts its accelerators' counters (its node, where it has none), and a CPU
node counts RAPL packages+DRAM. pm_counters' CPU and memory domains are
inside its node figure and never count.

Every channel also has a scope, the part of the machine its figure covers
(scope_of). Figures of different scopes are never added: a total names its
scope, and each scope measured gets its own total."""

from __future__ import annotations

import pandas as pd

ACCELERATORS = ("pynvml", "rocm", "gc")
# pm_counters' channels by kind: the whole node (the accelerators inside
# it), its CPU and memory domains, and each accelerator (jpwr.sys.pm_counters)
PM_COUNTER_SCOPES = {"node": "node", "cpu": "cpu-domain", "memory": "memory-domain",
                     "accel": "accelerator"}


def tier(method: str, device: str) -> int | None:
    """The channel's tier (lower wins), or None for channels that never count."""
    if method in ACCELERATORS:
        return 1
    if method == "gh":
        return 2 if device.startswith("module-") else None
    if method == "pm_counters":
        return 3 if device.startswith("accel") else 4 if device == "node" else None
    if method == "rapl":
        leaf = device.rsplit("/", 1)[-1]
        return 5 if leaf.startswith("package") or leaf == "dram" else None
    if method == "hwmon":
        return 6
    if method == "estimate":
        return 7
    return None


def scope_of(method: str, device: str) -> str:
    """What a channel's figure covers, in words without spaces or commas."""
    if method in ("pynvml", "rocm"):
        return "gpu"
    if method == "gc":
        return "ipu"
    if method == "gh":
        return device.split("-", 1)[0]  # module (the whole superchip), grace, cpu, sysio
    if method == "pm_counters":
        return PM_COUNTER_SCOPES[device.rstrip("0123456789")]
    if method == "rapl":
        leaf = device.rsplit("/", 1)[-1]
        if leaf.startswith("package") or leaf == "dram":
            return "cpu-socket+dram"
        return "platform" if leaf == "psys" else f"cpu-{leaf}"
    if method == "hwmon":
        return "hwmon-sensor"
    if method == "estimate":
        return "host-estimate"
    return method


def counted(rows: pd.DataFrame) -> pd.Series:
    """True for the rows (with columns host, method, device) whose channel
    counts into the host's total."""
    tiers = pd.Series([tier(m, d) for m, d in zip(rows["method"], rows["device"])],
                      index=rows.index, dtype="float")
    best = tiers.groupby(rows["host"]).transform("min")
    return (tiers == best) & tiers.notna()
