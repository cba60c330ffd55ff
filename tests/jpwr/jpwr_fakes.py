"""Fake device layers for the jpwr tests: sysfs/procfs trees in a temporary
directory and vendor bindings that stand in for the real modules."""

from __future__ import annotations

import time
import types
from pathlib import Path

from jpwr.method import MEASURED, Channel, Method
from tests.pm_counters_files import PmCounterFolder

VENDOR_MODULES = ("pynvml", "amdsmi", "pyrsmi", "pyrsmi.rocml", "gcipuinfo")


class FakeSysfs:
    def __init__(self, root: Path) -> None:
        self.root = root

    @staticmethod
    def write(path: Path, value) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")
        return path

    def hwmon(self, index: int, chip: str, **attributes) -> Path:
        directory = self.root / "class" / "hwmon" / f"hwmon{index}"
        self.write(directory / "name", chip)
        for name, value in attributes.items():
            self.write(directory / name, value)
        return directory

    def gh_meter(self, index: int, oem_info: str, microwatts: int) -> Path:
        """An ACPI power meter as on GH200: attributes in hwmonN/device/."""
        directory = self.root / "class" / "hwmon" / f"hwmon{index}"
        self.write(directory / "name", "power_meter")
        self.write(directory / "device" / "power1_oem_info", oem_info)
        return self.write(directory / "device" / "power1_average", microwatts)

    def pm_counters(self, **settings) -> PmCounterFolder:
        """HPE Cray's counters folder, cray/pm_counters, empty until written."""
        return PmCounterFolder(self.root / "cray" / "pm_counters", **settings)

    def rapl_zone(self, zone: str, name: str, energy_uj: int,
                  max_range_uj: int = 262_143_328_850) -> Path:
        directory = self.root / "class" / "powercap" / zone
        self.write(directory / "name", name)
        self.write(directory / "max_energy_range_uj", max_range_uj)
        return self.write(directory / "energy_uj", energy_uj)


class FakeProcStat:
    def __init__(self, root: Path, cpus: int) -> None:
        self.path = root / "stat"
        self.cpus = cpus
        self.busy = 0
        self.idle = 0

    def advance(self, busy: int, idle: int) -> None:
        """Adds ticks to the aggregate line (split over user/system and
        idle/iowait to exercise the parsing)."""
        self.busy += busy
        self.idle += idle
        user, system = self.busy - self.busy // 3, self.busy // 3
        idle_, iowait = self.idle - self.idle // 4, self.idle // 4
        lines = [f"cpu  {user} 0 {system} {idle_} {iowait} 0 0 0 0 0"]
        lines += [f"cpu{i} 1 0 1 1 0 0 0 0 0 0" for i in range(self.cpus)]
        lines += ["intr 0", "ctxt 0"]
        self.path.write_text("\n".join(lines) + "\n")


class FakeNvml(types.ModuleType):
    """The parts of nvidia-ml-py that jpwr uses. gpus: dicts with uuid,
    power_mw and energy_mj, optionally bus (PCI bus id; default: in index
    order), name and migs (UUIDs of its MIG instances); a GPU with lost=True
    raises like a fallen-off GPU. MIG handles are (gpu index, slot) pairs.
    Power limits: limit_mw, limit_range_mw (min, max) and default_mw (the
    top of the range where not given) of a GPU; with refuse=True setting one
    fails as without privilege, with unsupported=True reading one fails as
    on a vGPU or a MIG instance (NVML's Not Supported). Every limit set is
    logged in `limit_calls` as (handle, milliwatts)."""

    NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION = 3, 4

    class NVMLError(Exception):
        # nvidia-ml-py's errors carry their NVML return code as `value`
        def __init__(self, value) -> None:
            super().__init__({3: "Not Supported", 4: "Insufficient Permissions"}.get(value, value))
            self.value = value

    def __init__(self, gpus: list[dict]) -> None:
        super().__init__("pynvml")
        self.gpus = gpus
        self.initialised = 0
        self.limit_calls: list[tuple[int, int]] = []

    def nvmlInit(self):
        self.initialised += 1

    def nvmlShutdown(self):
        self.initialised -= 1

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        if isinstance(handle, tuple):
            return self.gpus[handle[0]]["migs"][handle[1]].encode()
        return self.gpus[handle]["uuid"].encode()  # older bindings return bytes

    def nvmlDeviceGetPciInfo(self, handle):
        bus = self.gpus[handle].get("bus", f"00000000:{handle + 1:02X}:00.0")
        return types.SimpleNamespace(busId=bus.encode())

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        if "migs" not in self.gpus[handle]:
            raise self.NVMLError("Not Supported")
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, slot):
        if slot >= len(self.gpus[handle]["migs"]):
            raise self.NVMLError("Not Found")
        return (handle, slot)

    def _gpu(self, handle):
        if self.gpus[handle].get("lost"):
            raise self.NVMLError("GPU is lost")
        return self.gpus[handle]

    def nvmlDeviceGetName(self, handle):
        return self.gpus[handle].get("name", "NVIDIA H100 80GB HBM3").encode()

    def nvmlDeviceGetSerial(self, handle):
        # a GeForce or a vGPU has none: NVML says Not Supported
        if "serial" not in self.gpus[handle]:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return self.gpus[handle]["serial"].encode()

    def nvmlDeviceGetVbiosVersion(self, handle):
        return self.gpus[handle].get("vbios", "96.00.89.00.01")

    def nvmlSystemGetDriverVersion(self):
        return "580.65.06"

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._gpu(handle)["power_mw"]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return self._gpu(handle)["energy_mj"]

    def _limits(self, handle):
        gpu = self._gpu(handle)
        if gpu.get("unsupported"):
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return self._limits(handle)["limit_mw"]

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle):
        return list(self._limits(handle)["limit_range_mw"])

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        gpu = self._limits(handle)
        return gpu.get("default_mw", gpu["limit_range_mw"][1])

    def nvmlDeviceSetPowerManagementLimit(self, handle, milliwatts):
        gpu = self._gpu(handle)
        if gpu.get("refuse"):
            raise self.NVMLError(self.NVML_ERROR_NO_PERMISSION)
        low, high = gpu["limit_range_mw"]
        if not low <= milliwatts <= high:
            raise self.NVMLError("Invalid Argument")
        self.limit_calls.append((handle, milliwatts))
        gpu["limit_mw"] = milliwatts
        self.limits_changed()

    def limits_changed(self) -> None:
        """Called after a limit was set (the file-backed fake keeps it)."""


class FakeScopedNvml(FakeNvml):
    """FakeNvml with NVML's power scopes (a newer nvidia-ml-py on a Grace
    Hopper driver): a GPU's module limit as module_limit_mw and
    module_range_mw (min, max); a GPU without them reports the module
    fields as not supported; module_default_mw is its default (the top of
    module_range_mw where not given). As nvidia-ml-py 13.615's
    nvmlDeviceSetPowerManagementLimit_v2, the set call passes on no NVML
    error: a refused or out-of-range module limit is left as it was. Each
    module limit set is logged in `limit_calls` as (handle, milliwatts,
    "module"). step_mw rounds what is set (a device of whole watts);
    takes_mw is what the next set leaves instead of what it asked."""

    NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED = 0, 3
    NVML_POWER_SCOPE_GPU, NVML_POWER_SCOPE_MODULE = 0, 1
    NVML_FI_DEV_POWER_MIN_LIMIT, NVML_FI_DEV_POWER_MAX_LIMIT = 187, 188
    NVML_FI_DEV_POWER_DEFAULT_LIMIT, NVML_FI_DEV_POWER_REQUESTED_LIMIT = 189, 192

    def nvmlDeviceGetFieldValues(self, handle, field_ids):
        gpu = self._gpu(handle)
        out = []
        for field, scope in field_ids:
            key = {self.NVML_FI_DEV_POWER_REQUESTED_LIMIT: ("module_limit_mw", None),
                   self.NVML_FI_DEV_POWER_MIN_LIMIT: ("module_range_mw", 0),
                   self.NVML_FI_DEV_POWER_MAX_LIMIT: ("module_range_mw", 1),
                   self.NVML_FI_DEV_POWER_DEFAULT_LIMIT: ("module_default_mw", None)}[field]
            value = gpu.get(key[0]) if scope == self.NVML_POWER_SCOPE_MODULE else None
            if key[0] == "module_default_mw" and value is None and "module_range_mw" in gpu:
                value = gpu["module_range_mw"][1]
            if value is not None and key[1] is not None:
                value = value[key[1]]
            out.append(types.SimpleNamespace(
                fieldId=field, scopeId=scope, value=types.SimpleNamespace(uiVal=value or 0),
                nvmlReturn=self.NVML_SUCCESS if value is not None else self.NVML_ERROR_NOT_SUPPORTED))
        return out

    def nvmlDeviceSetPowerManagementLimit_v2(self, handle, scope, milliwatts):
        gpu = self._gpu(handle)
        assert scope == self.NVML_POWER_SCOPE_MODULE, "the fake holds module limits only"
        low, high = gpu.get("module_range_mw", (0, 0))
        if gpu.get("refuse") or "module_limit_mw" not in gpu or not low <= milliwatts <= high:
            return  # NVML's error code is dropped by the binding
        self.limit_calls.append((handle, milliwatts, "module"))
        # a device may round what it is asked (step_mw) or take another value (takes_mw)
        step = gpu.get("step_mw")
        taken = round(milliwatts / step) * step if step else milliwatts
        gpu["module_limit_mw"] = gpu.pop("takes_mw", taken)
        self.limits_changed()


class FakeAmdSmi(types.ModuleType):
    """amdsmi's calls that jpwr uses; power caps as power_cap_uw,
    cap_range_uw (min, max) and default_cap_uw (the top of the range where
    not given) of a GPU, refuse=True as without privilege, unsupported=True
    as a device without a cap of its own (an MI250's second GCD)."""

    class AmdSmiRetCode:
        STATUS_NOT_SUPPORTED, STATUS_NO_PERM = 2, 10

    class AmdSmiLibraryException(Exception):
        def __init__(self, err_code) -> None:
            super().__init__(f"AMDSMI_STATUS {err_code}")
            self.err_code = err_code

    def __init__(self, gpus: list[dict]) -> None:
        super().__init__("amdsmi")
        self.gpus = gpus

    def amdsmi_init(self):
        pass

    def amdsmi_shut_down(self):
        pass

    def amdsmi_get_processor_handles(self):
        return list(range(len(self.gpus)))

    def amdsmi_get_gpu_device_uuid(self, handle):
        return self.gpus[handle]["uuid"]

    def amdsmi_get_gpu_device_bdf(self, handle):
        return self.gpus[handle].get("bdf", f"0000:{handle + 0xc1:02x}:00.0")

    def amdsmi_get_gpu_board_info(self, handle):
        return {"product_serial": self.gpus[handle].get("serial", "N/A"), "product_name": "MI250"}

    def amdsmi_get_gpu_asic_info(self, handle):
        return {"market_name": "AMD Instinct MI250X / MI250", "asic_serial": "0xABCDEF0123456789"}

    def amdsmi_get_gpu_vbios_info(self, handle):
        return {"version": "113-D65201-046"}

    def amdsmi_get_gpu_driver_info(self, handle):
        return {"driver_name": "amdgpu", "driver_version": "6.8.5"}

    def amdsmi_get_power_info(self, handle):
        return self.gpus[handle]["power_info"]

    def amdsmi_get_energy_count(self, handle):
        return self.gpus[handle]["energy_count"]

    def _capped(self, handle) -> dict:
        gpu = self.gpus[handle]
        if gpu.get("unsupported"):
            raise self.AmdSmiLibraryException(self.AmdSmiRetCode.STATUS_NOT_SUPPORTED)
        return gpu

    def amdsmi_get_power_cap_info(self, handle):
        gpu = self._capped(handle)
        low, high = gpu["cap_range_uw"]
        return {"power_cap": gpu["power_cap_uw"], "min_power_cap": low, "max_power_cap": high,
                "default_power_cap": gpu.get("default_cap_uw", high), "dpm_cap": 0}

    def amdsmi_set_power_cap(self, handle, sensor, cap):
        gpu = self._capped(handle)
        if gpu.get("refuse"):
            raise self.AmdSmiLibraryException(self.AmdSmiRetCode.STATUS_NO_PERM)
        gpu["power_cap_uw"] = cap
        self.caps_changed()

    def caps_changed(self) -> None:
        """Called after a cap was set (the file-backed fake keeps it)."""


class FakeRocml(types.ModuleType):
    def __init__(self, watts: list[float]) -> None:
        super().__init__("pyrsmi.rocml")
        self.watts = watts

    def smi_initialize(self):
        pass

    def smi_shutdown(self):
        pass

    def smi_get_device_count(self):
        return len(self.watts)

    def smi_get_device_average_power(self, dev):
        return self.watts[dev]


class FakeGcIpuInfo(types.ModuleType):
    IpuPower = "ipu power"
    SerialNumber, PciId, FirmwareVersion = "serial number", "PCI Id", "firmware version"

    def __init__(self, powers: list[str]) -> None:
        super().__init__("gcipuinfo")
        self.powers = powers
        module = self

        class Info:
            def setUpdateMode(self, on):
                module.update_mode = on

            def getDevices(self):
                return [{"id": str(i)} for i in range(len(module.powers))]

            def getNamedAttributeForAll(self, attribute):
                # this fake's gcipuinfo has no DriverVersion: that key stays unknown
                return {module.IpuPower: list(module.powers),
                        module.SerialNumber: [f"0123.0045.{i:04d}" for i in range(len(module.powers))],
                        module.PciId: [f"0000:{0x1a + i:02x}:00.0" for i in range(len(module.powers))],
                        module.FirmwareVersion: ["2.6.0"] * len(module.powers)}[attribute]

        self.gcipuinfo = Info


class SyntheticPower(Method):
    """A method whose power is a known function of wall-clock time."""

    name = "hwmon"  # a real name, so that the counting rule applies to it

    def __init__(self, watts_at, devices=("synthetic",)) -> None:
        super().__init__()
        self.watts_at = watts_at
        self.channels = [Channel(d, MEASURED) for d in devices]

    def read(self) -> list[float]:
        now = time.time()
        return [self.watts_at(now)] * len(self.channels)


def wait_for(condition, what: str, timeout_s: float = 30.0) -> None:
    """Polls until condition() holds; the timeout only guards against a hang
    and is far above what any machine needs."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
