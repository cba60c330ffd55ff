"""Methods by name, as --methods and the benchmarks give them:

  pynvml  NVIDIA GPUs (NVML)            gh        Grace-Hopper hwmon rails
  rocm    AMD GPUs (amdsmi or pyrsmi)   rapl      Linux powercap RAPL counters
  gc      Graphcore IPUs (gcipuinfo)    hwmon     generic hwmon power sensors
  pm_counters  HPE Cray node, CPU, memory and accelerator counters
  estimate  CPU utilisation x per-CPU power model (estimated, not measured)
  auto    every real sensor this node has; estimate only where there is none"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from jpwr.method import Method, MethodUnavailable
from jpwr.notice import say

MODULES = {
    "pynvml": "jpwr.gpu.pynvml",
    "rocm": "jpwr.gpu.rocm",
    "gc": "jpwr.ipu.gc",
    "gh": "jpwr.sys.gh",
    "pm_counters": "jpwr.sys.pm_counters",
    "rapl": "jpwr.sys.rapl",
    "hwmon": "jpwr.sys.hwmon",
    "estimate": "jpwr.sys.estimate",
}
NAMES = (*MODULES, "auto")
REAL_SENSORS = ("pynvml", "rocm", "gc", "gh", "pm_counters", "rapl", "hwmon")


class UnknownMethod(ValueError):
    pass


def check_names(names: Iterable[str]) -> list[str]:
    names = list(names)
    if not names:
        raise UnknownMethod(f"no method given (known: {', '.join(NAMES)})")
    for name in names:
        if name not in NAMES:
            raise UnknownMethod(f"unknown method {name!r} (known: {', '.join(NAMES)})")
    return names


def create(name: str) -> Method:
    method: Method = importlib.import_module(MODULES[name]).power()
    return method


def auto(report: Callable[[str], None] = say) -> list[Method]:
    """Every real sensor that works here; the estimate only if none does.
    Says what it picked and why the others were left out."""
    picked, left_out = [], []
    for name in REAL_SENSORS:
        try:
            picked.append(create(name))
        except MethodUnavailable as err:
            left_out.append(str(err))
    if not picked:
        picked.append(create("estimate"))
    names = ", ".join(m.name for m in picked)
    kind = "ESTIMATED, no power sensor found" if picked[0].name == "estimate" else "measured"
    report(f"auto picked {names} ({kind})")
    if left_out:
        report("auto left out: " + "; ".join(left_out))
    return picked


def from_names(names: Iterable[str]) -> list[Method]:
    """Method objects for names such as ["auto"] or ["pynvml", "gh"]. Raises
    UnknownMethod for a name that does not exist and MethodUnavailable (one
    line, naming what is missing) for one that cannot work on this node."""
    names = list(dict.fromkeys(check_names(names)))
    methods: list[Method] = []
    try:
        for name in names:
            for method in auto() if name == "auto" else [create(name)]:
                if method.name in {have.name for have in methods}:
                    method.close()  # "auto" and an explicit name picked it twice
                else:
                    methods.append(method)
    except BaseException:
        for method in methods:
            method.close()
        raise
    return methods
