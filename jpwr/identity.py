"""What tells this node's accelerators from others of their kind: every
GPU and IPU the vendor libraries list (NVML, amdsmi, gcipuinfo, through the
methods' own bindings), each with its UUID, serial, PCI bus id, firmware
and driver, so that two runs can be told to come from one machine or two.
A library that is not here names nothing."""

from __future__ import annotations

from jpwr.gpu import pynvml, rocm
from jpwr.ipu import gc


def devices() -> list[dict]:
    """Every accelerator the vendor libraries of this node list, in their
    order; [] on a node without any (a CPU host)."""
    return [*pynvml.identity(), *rocm.identity(), *gc.identity()]
