"""AMD GPUs through amdsmi (ROCm 6 and newer, extra 'rocm') or, where only
the older stack is installed, pyrsmi. amdsmi gives socket power in W and an
energy accumulator (ticks of counter_resolution microjoules) used as
hardware counter; pyrsmi gives average power only. The job's GPUs are those
left by ROCR_VISIBLE_DEVICES and then HIP_VISIBLE_DEVICES (or
CUDA_VISIBLE_DEVICES, where HIP's is unset), in that order, as the ROCm
runtime applies them (jpwr/gpu/visible.py). Channels are named gpu<N> with N the
library's index of the GPU on the node."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from types import ModuleType

from jpwr.gpu.visible import hip_visible
from jpwr.method import Channel, Method, MethodUnavailable
from jpwr.notice import one_line

# ROCm 7 reports socket_power, MI300 current_socket_power, MI200 and older
# average_socket_power; the others read "N/A" (a string) or 0.
_POWER_KEYS = ("socket_power", "current_socket_power", "average_socket_power")


class AmdSmiLibrary:
    has_counter = True

    def __init__(self, amdsmi: ModuleType) -> None:
        self._lib = amdsmi
        amdsmi.amdsmi_init()
        self.handles = amdsmi.amdsmi_get_processor_handles()
        self.uuids = [self._uuid(h) for h in self.handles]

    def _uuid(self, handle: object) -> str:
        try:
            return str(self._lib.amdsmi_get_gpu_device_uuid(handle))
        except Exception:  # noqa: BLE001 - UUIDs only matter for UUID entries in *_VISIBLE_DEVICES
            return ""

    def power_w(self, index: int) -> float:
        info = self._lib.amdsmi_get_power_info(self.handles[index])
        for key in _POWER_KEYS:
            value = info.get(key)
            if isinstance(value, (int, float)) and value > 0:
                return float(value)
        raise ValueError(f"no power value in {info}")

    def energy_j(self, index: int) -> float:
        count = self._lib.amdsmi_get_energy_count(self.handles[index])
        # The accumulator's key was 'power' before ROCm 6.2.
        ticks = count.get("energy_accumulator", count.get("power"))
        return float(ticks * count["counter_resolution"] * 1e-6)

    def close(self) -> None:
        self._lib.amdsmi_shut_down()


class PyrsmiLibrary:
    has_counter = False

    def __init__(self, rocml: ModuleType) -> None:
        self._lib = rocml
        rocml.smi_initialize()
        count = rocml.smi_get_device_count()
        self.handles = list(range(count))
        uuid = getattr(rocml, "smi_get_device_uuid", lambda _dev: "")
        self.uuids = [str(uuid(dev)) for dev in self.handles]

    def power_w(self, index: int) -> float:
        watts = self._lib.smi_get_device_average_power(index)
        if watts < 0:  # pyrsmi's way of saying the call failed
            raise RuntimeError("rocm-smi returned no power")
        return float(watts)

    def close(self) -> None:
        self._lib.smi_shutdown()


def _open_library() -> AmdSmiLibrary | PyrsmiLibrary:
    for module, wrapper in (("amdsmi", AmdSmiLibrary), ("pyrsmi.rocml", PyrsmiLibrary)):
        try:
            binding = importlib.import_module(module)
        except ImportError:
            continue
        try:
            return wrapper(binding)
        except Exception as err:  # vendor exception types
            raise MethodUnavailable(f"rocm: {module} did not start ({one_line(err)})") from err
    raise MethodUnavailable("rocm: neither Python module 'amdsmi' nor 'pyrsmi' is installed "
                            "(amdsmi ships with ROCm, extra 'rocm')")


class RocmPower(Method):
    name = "rocm"

    def __init__(self) -> None:
        super().__init__()
        self._lib = _open_library()
        try:
            candidates = hip_visible(self._lib.uuids, self.name)
            if not candidates:
                raise MethodUnavailable(f"rocm: no AMD GPU visible (the library lists "
                                        f"{len(self._lib.handles)})")
        except MethodUnavailable:
            self._lib.close()
            raise
        self._indices = candidates
        self.channels = [Channel(f"gpu{i}", info=self._lib.uuids[i]) for i in candidates]

    def read(self) -> list[float]:
        return [self._value(k, lambda: self._lib.power_w(i))
                for k, i in enumerate(self._indices)]

    def energy_j(self) -> list[float] | None:
        if not self._lib.has_counter:
            return None
        return [self._counter_j(i) for i in self._indices]

    def _counter_j(self, index: int) -> float:
        # Not supported in VMs and on some boards: NaN, and read() reports a
        # GPU that is lost altogether.
        if not isinstance(self._lib, AmdSmiLibrary):
            return math.nan  # pyrsmi has no counter
        try:
            return self._lib.energy_j(index)
        except Exception:  # noqa: BLE001
            return math.nan

    def close(self) -> None:
        try:
            self._lib.close()
        except Exception:  # noqa: BLE001 - already shut down or driver gone
            pass


def _asked(call: Callable[[object], object] | None, handle: object, key: str | None = None) -> str | None:
    """An amdsmi answer (or its key of a dict answer) as text; None where
    the device has none, or this amdsmi lacks the call (call None)."""
    if call is None:
        return None
    try:
        value = call(handle)
        if key is not None:
            value = value.get(key) if isinstance(value, dict) else None
    except Exception:  # noqa: BLE001 - amdsmi's exceptions, a call this version lacks
        return None
    return None if value in (None, "", "N/A") else str(value)


def identity() -> list[dict]:
    """Every AMD GPU of this node by what tells it from another of its kind:
    amdsmi's index, name, UUID, board serial, PCI bus id (BDF), VBIOS and
    the driver's version; [] where amdsmi does not start here."""
    try:
        lib = importlib.import_module("amdsmi")
        lib.amdsmi_init()
    except Exception:  # noqa: BLE001 - no amdsmi (pyrsmi names no device): nothing to name
        return []
    try:
        out = []
        for index, handle in enumerate(lib.amdsmi_get_processor_handles()):
            serial = _asked(getattr(lib, "amdsmi_get_gpu_board_info", None), handle, "product_serial") \
                or _asked(getattr(lib, "amdsmi_get_gpu_asic_info", None), handle, "asic_serial")
            out.append({"library": "amdsmi", "index": index,
                        "name": _asked(getattr(lib, "amdsmi_get_gpu_asic_info", None), handle, "market_name"),
                        "uuid": _asked(lib.amdsmi_get_gpu_device_uuid, handle), "serial": serial,
                        "pci_bus_id": _asked(getattr(lib, "amdsmi_get_gpu_device_bdf", None), handle),
                        "firmware": _asked(getattr(lib, "amdsmi_get_gpu_vbios_info", None), handle,
                                           "version"),
                        "driver": _asked(getattr(lib, "amdsmi_get_gpu_driver_info", None), handle,
                                         "driver_version")})
        return out
    except Exception:  # noqa: BLE001 - a GPU lost while listing
        return []
    finally:
        try:
            lib.amdsmi_shut_down()
        except Exception:  # noqa: BLE001
            pass


power = RocmPower  # the upstream name
