"""NVIDIA GPUs through NVML (package nvidia-ml-py, imported as pynvml):
nvmlDeviceGetPowerUsage (mW) per sample and nvmlDeviceGetTotalEnergyConsumption
(mJ since the driver was loaded, Volta and newer) as hardware counter.
On GH200 the counter covers the whole module (Grace, Hopper and memory)
while the power reading covers the GPU, so there the counter is reported
beside the GPU's figure, never as it.
Channels are named gpu<N> with N the NVML index, which is the same on every
rank of a node whatever CUDA_VISIBLE_DEVICES says, so ranks that measure
the same GPU can be recognised and counted once. CUDA_VISIBLE_DEVICES's
index entries count in CUDA's order (jpwr.gpu.visible.cuda_order), which
need not be NVML's."""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable
from types import ModuleType

from jpwr.gpu.visible import cuda_order, restrict
from jpwr.method import Channel, Method, MethodUnavailable, import_binding
from jpwr.notice import one_line


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _name(nvml: ModuleType, handle: object) -> str:
    try:
        return _text(nvml.nvmlDeviceGetName(handle))
    except Exception:  # noqa: BLE001 - the name only refines the counter's scope
        return ""


def _bus_id(nvml: ModuleType, handle: object) -> str:
    return _text(nvml.nvmlDeviceGetPciInfo(handle).busId)


def _mig_parent(nvml: ModuleType, handles: list[object], uuid: str) -> int | None:
    """The index of the GPU that holds the MIG instance `uuid` (lower case,
    without its MIG- prefix)."""
    for index, handle in enumerate(handles):
        try:
            slots = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
        except Exception:  # noqa: BLE001 - a GPU without MIG support
            continue
        for slot in range(slots):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except Exception:  # noqa: BLE001 - an empty slot
                continue
            if _text(nvml.nvmlDeviceGetUUID(mig)).lower().removeprefix("mig-").startswith(uuid):
                return index
    return None


class NvmlPower(Method):
    name = "pynvml"

    def __init__(self) -> None:
        super().__init__()
        nvml = import_binding("pynvml", self.name, "pip install nvidia-ml-py, extra 'nvidia'")
        try:
            nvml.nvmlInit()
        except Exception as err:  # NVMLError subclasses, OSError
            raise MethodUnavailable(f"pynvml: NVML did not start ({one_line(err)})") from err
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            uuids = [_text(nvml.nvmlDeviceGetUUID(h)) for h in handles]
            order = cuda_order([_bus_id(nvml, h) for h in handles],
                               [_name(nvml, h) for h in handles], self.name)
            picked = restrict(order, uuids, "CUDA_VISIBLE_DEVICES", self.name,
                              mig_parent=lambda uuid: _mig_parent(nvml, handles, uuid))
            if not picked:
                raise MethodUnavailable(
                    f"pynvml: no NVIDIA GPU visible (NVML lists {len(handles)}, "
                    f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
        except MethodUnavailable:
            nvml.nvmlShutdown()
            raise
        except Exception as err:
            nvml.nvmlShutdown()
            raise MethodUnavailable(f"pynvml: cannot list GPUs ({one_line(err)})") from err
        self._nvml = nvml
        self._handles = [handles[i] for i in picked]
        self.channels = [Channel(f"gpu{i}", info=uuids[i],
                                 counter_scope="module" if "GH200" in _name(nvml, handles[i]) else "")
                         for i in picked]

    def read(self) -> list[float]:
        get = self._nvml.nvmlDeviceGetPowerUsage
        return [self._value(i, lambda: get(h) * 1e-3) for i, h in enumerate(self._handles)]

    def energy_j(self) -> list[float]:
        return [self._counter_j(h) for h in self._handles]

    def _counter_j(self, handle: object) -> float:
        # Older GPUs have no counter and a lost GPU none either: NaN, no
        # warning here, since read() already reports a lost GPU.
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) * 1e-3
        except Exception:  # noqa: BLE001
            return math.nan

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - already shut down or driver gone
            pass


def _asked(call: Callable[..., object], *args: object) -> str | None:
    """An NVML answer as text; None where the device or the binding has none."""
    try:
        return _text(call(*args))
    except Exception:  # noqa: BLE001 - NVMLError (Not Supported), an older binding's AttributeError
        return None


def identity() -> list[dict]:
    """Every NVIDIA GPU of this node by what tells it from another of its
    kind: NVML's index, name, UUID, board serial, PCI bus id and VBIOS,
    with the driver's version; [] where NVML does not start here."""
    try:
        nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no binding, no driver: no NVIDIA GPU to name
        return []
    try:
        driver = _asked(nvml.nvmlSystemGetDriverVersion)
        out = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            out.append({"library": "nvml", "index": index, "name": _asked(nvml.nvmlDeviceGetName, handle),
                        "uuid": _asked(nvml.nvmlDeviceGetUUID, handle),
                        "serial": _asked(nvml.nvmlDeviceGetSerial, handle),
                        "pci_bus_id": _asked(lambda h: nvml.nvmlDeviceGetPciInfo(h).busId, handle),
                        "firmware": _asked(nvml.nvmlDeviceGetVbiosVersion, handle), "driver": driver})
        return out
    except Exception:  # noqa: BLE001 - a GPU lost while listing: what was read stays unknown
        return []
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


power = NvmlPower  # the upstream name
