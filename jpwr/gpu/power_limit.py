"""A GPU's power limit for the length of a job: read the limit the device
has, check the one asked for against the device's range and the system's,
set it, read back what the device reports, and put the previous limit back
whatever ends the job. A limit left changed is a node left broken for the
next user, so the previous limit is restored

- when the block ends, normally or by an exception;
- on a signal whose action is still the default one (which would end the
  process without unwinding): the limit is put back first, then the signal
  ends the process as it would have (a program that handles its stop
  signals itself leaves its work and ends the block normally);
- at interpreter exit, should the block not have ended by then.

Only SIGKILL (Slurm's last word after its KillWait) cannot be answered:
the limit stays until someone sets it back (or the driver is reloaded).

NVIDIA GPUs through NVML (nvidia-ml-py: nvmlDeviceGetPowerManagementLimit,
...Constraints, nvmlDeviceSetPowerManagementLimit, all in milliwatts), AMD
GPUs through amdsmi (amdsmi_get_power_cap_info, amdsmi_set_power_cap, in
microwatts). Each process sets one device: the one the launcher gives its
local rank, counted the way the runtime counts the visible devices.

A limit has a scope (SCOPES): `gpu`, the GPU's own limit (above), or
`module`, a Grace Hopper superchip's limit for the whole of it, which NVML
sets through nvmlDeviceSetPowerManagementLimit_v2 at NVML_POWER_SCOPE_MODULE
and reports in the field values NVML_FI_DEV_POWER_REQUESTED_LIMIT (the limit
a client set), ..._MIN_LIMIT and ..._MAX_LIMIT read at that scope. A binding
or driver without these, or a device that reports no module limit, refuses
the module scope in one line; nothing falls back to the GPU's limit. As
nvidia-ml-py's _v2 call does not pass NVML's return code on (13.615), a
module limit is read back after each set, and one the device did not take is
a refusal."""

from __future__ import annotations

import atexit
import math
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from jpwr.gpu.visible import cuda_order, restrict
from jpwr.method import MethodUnavailable, import_binding
from jpwr.notice import one_line, say

# The signals that end a process by default and that a job meets: scancel
# and the time limit (TERM), the time-limit warning (USR1, aux/job.sh.in),
# USR2 and a lost terminal (HUP). INT raises KeyboardInterrupt, which unwinds.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)


class PowerLimitError(RuntimeError):
    """The limit cannot be set: no library, no privilege, a limit out of
    range. The message is one line that says what to do."""


def _local(picked: list[int], local_index: int, listed: int, library: str, variables: str) -> int:
    """The library's index of the device a local rank trains on: its
    position among the visible ones (one device per task: the only one)."""
    if not picked:
        raise MethodUnavailable(f"{library} lists {listed} GPUs and {variables} leave none")
    return picked[local_index % len(picked)]


GPU, MODULE = "gpu", "module"
SCOPES = (GPU, MODULE)
# NVML's fields of a scope's limit: the one a client set, the lowest and highest settable
_MODULE_FIELDS = ("NVML_FI_DEV_POWER_REQUESTED_LIMIT", "NVML_FI_DEV_POWER_MIN_LIMIT",
                  "NVML_FI_DEV_POWER_MAX_LIMIT")
_MODULE_CALLS = ("nvmlDeviceSetPowerManagementLimit_v2", "nvmlDeviceGetFieldValues",
                 "NVML_POWER_SCOPE_MODULE", *_MODULE_FIELDS)
_AT_GPU_SCOPE = "or give the points in watts of the GPU limit at gpu scope (CARAML_POWER_LIMIT_SCOPE=gpu)"


class _Nvml:
    library = "NVML"
    privilege = ("root or a power-management privilege the centre grants (a root service or "
                 "a sudo rule for nvidia-smi --power-limit)")

    def __init__(self, local_index: int, scope: str = GPU) -> None:
        if scope not in SCOPES:
            raise PowerLimitError(f"power limit scope {scope!r} is none of {', '.join(SCOPES)}")
        nvml = import_binding("pynvml", "NVML", "pip install nvidia-ml-py")
        if scope == MODULE:
            missing = [name for name in _MODULE_CALLS if not hasattr(nvml, name)]
            if missing:
                raise PowerLimitError(
                    f"the module power limit needs NVML's power scopes, and this nvidia-ml-py lacks "
                    f"{', '.join(missing)}; install a newer nvidia-ml-py (and driver) {_AT_GPU_SCOPE}")
        self.scope = scope
        try:
            nvml.nvmlInit()
        except Exception as err:  # noqa: BLE001 - NVMLError subclasses, OSError
            raise MethodUnavailable(f"NVML did not start ({one_line(err)})") from err
        self._nvml = nvml
        try:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            uuids = [nvml.nvmlDeviceGetUUID(h) for h in handles]
            uuids = [u.decode() if isinstance(u, bytes) else str(u) for u in uuids]
            buses = [nvml.nvmlDeviceGetPciInfo(h).busId for h in handles]
            names = [nvml.nvmlDeviceGetName(h) for h in handles]
            order = cuda_order([b.decode() if isinstance(b, bytes) else str(b) for b in buses],
                               [str(n) for n in names], "NVML")
            picked = restrict(order, uuids, "CUDA_VISIBLE_DEVICES", "NVML")
            index = _local(picked, local_index, len(handles), "NVML", "CUDA_VISIBLE_DEVICES")
        except Exception:
            nvml.nvmlShutdown()
            raise
        self.device = f"gpu{index}"
        self._handle = handles[index]

    def _module_mw(self) -> list[int]:
        """The module scope's requested, lowest and highest limit in mW:
        PowerLimitError where the device reports none of them."""
        nvml = self._nvml
        scope = nvml.NVML_POWER_SCOPE_MODULE
        try:
            values = nvml.nvmlDeviceGetFieldValues(
                self._handle, [(getattr(nvml, name), scope) for name in _MODULE_FIELDS])
        except Exception as err:  # noqa: BLE001 - NVMLError subclasses
            self._refuse_module(one_line(err))
        out = []
        for name, value in zip(_MODULE_FIELDS, values):
            if value.nvmlReturn != getattr(nvml, "NVML_SUCCESS", 0):
                self._refuse_module(f"{name}: NVML error {value.nvmlReturn}")
            out.append(value.value.uiVal)
        return out

    def _refuse_module(self, why: str):
        raise PowerLimitError(
            f"{self.device} reports no module power limit through NVML ({why}): this driver or "
            f"device sets no module limit; ask the centre for a driver that does {_AT_GPU_SCOPE}")

    def limit_w(self) -> float:
        if self.scope == MODULE:
            return self._module_mw()[0] * 1e-3
        return self._nvml.nvmlDeviceGetPowerManagementLimit(self._handle) * 1e-3

    def range_w(self) -> tuple[float, float]:
        if self.scope == MODULE:
            _, low, high = self._module_mw()
        else:
            low, high = self._nvml.nvmlDeviceGetPowerManagementLimitConstraints(self._handle)
        return low * 1e-3, high * 1e-3

    def set_w(self, watts: float) -> None:
        milliwatts = round(watts * 1000)
        if self.scope == GPU:
            self._nvml.nvmlDeviceSetPowerManagementLimit(self._handle, milliwatts)
            return
        self._nvml.nvmlDeviceSetPowerManagementLimit_v2(
            self._handle, self._nvml.NVML_POWER_SCOPE_MODULE, milliwatts)
        taken = self._module_mw()[0]
        if taken != milliwatts:
            raise RuntimeError(f"the module limit reads {taken * 1e-3:g} W after setting it; "
                                "the binding passes on no NVML error, so the cause may be a "
                                "missing privilege or a device that refuses the module scope")

    def lacks_privilege(self, err: BaseException) -> bool:
        code = getattr(self._nvml, "NVML_ERROR_NO_PERMISSION", 4)
        return getattr(err, "value", None) == code

    def refusal_advice(self) -> str:
        return f"; {_AT_GPU_SCOPE.removeprefix('or ')}" if self.scope == MODULE else ""

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - already shut down or driver gone
            pass


class _AmdSmi:
    library = "amdsmi"
    privilege = ("root or a power-management privilege the centre grants (a root service or "
                 "a sudo rule for amd-smi set --power-cap)")

    scope = GPU

    def __init__(self, local_index: int, scope: str = GPU) -> None:
        if scope != GPU:
            raise PowerLimitError(f"amdsmi sets no {scope} power limit; give the points at gpu scope "
                                  "(CARAML_POWER_LIMIT_SCOPE=gpu)")
        lib = import_binding("amdsmi", "amdsmi", "amdsmi ships with ROCm")
        try:
            lib.amdsmi_init()
        except Exception as err:  # noqa: BLE001 - vendor exception types
            raise MethodUnavailable(f"amdsmi did not start ({one_line(err)})") from err
        self._lib = lib
        try:
            handles = lib.amdsmi_get_processor_handles()
            uuids = [str(lib.amdsmi_get_gpu_device_uuid(h)) for h in handles]
            picked = list(range(len(handles)))
            for variable in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
                picked = restrict(picked, uuids, variable, "amdsmi")
            index = _local(picked, local_index, len(handles), "amdsmi",
                           "ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES")
        except Exception:
            lib.amdsmi_shut_down()
            raise
        self.device = f"gpu{index}"
        self._handle = handles[index]

    def _info(self) -> dict:
        return self._lib.amdsmi_get_power_cap_info(self._handle)

    def limit_w(self) -> float:
        return self._info()["power_cap"] * 1e-6

    def range_w(self) -> tuple[float, float]:
        info = self._info()
        return info["min_power_cap"] * 1e-6, info["max_power_cap"] * 1e-6

    def set_w(self, watts: float) -> None:
        self._lib.amdsmi_set_power_cap(self._handle, 0, round(watts * 1e6))

    def lacks_privilege(self, err: BaseException) -> bool:
        codes = getattr(self._lib, "AmdSmiRetCode", None)
        wanted = getattr(codes, "STATUS_NO_PERM", None)
        return (wanted is not None and getattr(err, "err_code", None) == wanted) \
            or "permission" in str(err).lower()

    def refusal_advice(self) -> str:
        return ""

    def close(self) -> None:
        try:
            self._lib.amdsmi_shut_down()
        except Exception:  # noqa: BLE001
            pass


LIBRARIES = {"nvml": _Nvml, "amdsmi": _AmdSmi}


def open_device(local_index: int, library: str = "auto", scope: str = GPU):
    """The device of local rank `local_index` in the named library, or in
    the first of NVML and amdsmi that works here ("auto"), its limit at
    `scope`."""
    names = list(LIBRARIES) if library == "auto" else [library]
    reasons = []
    for name in names:
        try:
            return LIBRARIES[name](local_index, scope)
        except MethodUnavailable as err:
            reasons.append(str(err))
    raise PowerLimitError("no GPU whose power limit can be set here (" + "; ".join(reasons) + ")")


@dataclass
class Limit:
    """What a block did to its device's limit, in watts."""

    device: str
    asked_w: float | None  # None: the limit was left as it was
    before_w: float
    reported_w: float
    restored: bool = False
    scope: str = GPU  # SCOPES: the GPU's limit or its superchip module's


def _range_text(low: float, high: float) -> str:
    return f"{low:g}-{high:g} W"


def check_range(asked_w: float, device_range: tuple[float, float],
                system_range: tuple[float | None, float | None] | None, device: str) -> None:
    """PowerLimitError naming the range where asked_w lies outside the
    device's range or the system's (either end of which may be open)."""
    low, high = device_range
    sys_low, sys_high = system_range or (None, None)
    allowed = (max(low, sys_low) if sys_low is not None else low,
               min(high, sys_high) if sys_high is not None else high)
    if allowed[0] <= asked_w <= allowed[1]:
        return
    system = "" if system_range is None else \
        f"; the system's {_range_text(sys_low or 0, sys_high or math.inf)}"
    raise PowerLimitError(
        f"power limit {asked_w:g} W is outside {_range_text(*allowed)}, the range {device} allows "
        f"(the device's {_range_text(low, high)}{system}); ask for a limit inside it")


class _Restorer:
    """Puts the previous limit back once, from whichever end comes first."""

    def __init__(self, device, before_w: float) -> None:
        self._device, self._before_w = device, before_w
        self.changed = False  # set once the new limit is in place
        self._handlers: dict[int, object] = {}
        self._pid = os.getpid()

    def __call__(self) -> bool:
        if not self.changed:
            return True
        try:
            self._device.set_w(self._before_w)
        except Exception as err:  # noqa: BLE001 - vendor exception types
            say(f"warning: the power limit of {self._device.device} could not be put back to "
                f"{self._before_w:g} W ({one_line(err)}); set it by hand")
            return False
        self.changed = False
        return True

    def _on_signal(self, signum, _frame) -> None:
        # A process forked inside the block (a data loader worker) inherits
        # this handler; only the process that set the limit puts it back.
        if os.getpid() == self._pid:
            self()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def arm(self) -> None:
        self._pid = os.getpid()
        atexit.register(self)
        for sig in ENDING_SIGNALS:
            try:
                if signal.getsignal(sig) is signal.SIG_DFL:
                    self._handlers[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread: the block's end and atexit remain
                break

    def disarm(self) -> None:
        atexit.unregister(self)
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)
        self._handlers.clear()


@contextmanager
def limited(asked_w: float | None, *, local_index: int = 0, library: str = "auto",
            system_range: tuple[float | None, float | None] | None = None,
            scope: str = GPU, device: object | None = None) -> Iterator[Limit]:
    """Sets this process's device to asked_w watts at `scope` (SCOPES) for
    the block and puts the previous limit back at its end; asked_w None sets
    nothing and reports the limit the device has. PowerLimitError (one line)
    where no library works, the scope is not offered, the limit is out of
    range or setting it is not allowed. `device` stands in for the opened
    device (tests)."""
    opened = device or open_device(local_index, library, scope)
    try:
        before = opened.limit_w()
        if asked_w is None:
            limit = Limit(opened.device, None, before, before, restored=True, scope=opened.scope)
            yield limit
            return
        check_range(asked_w, opened.range_w(), system_range,
                    opened.device if opened.scope == GPU else f"the module of {opened.device}")
        limit = Limit(opened.device, asked_w, before, before, scope=opened.scope)
        restore = _Restorer(opened, before)
        restore.arm()
        try:
            _set(opened, asked_w)
            restore.changed = True
            limit.reported_w = opened.limit_w()
            yield limit
        finally:
            limit.restored = restore()
            restore.disarm()
    finally:
        opened.close()


def _set(device, watts: float) -> None:
    limit = "power limit" if device.scope == GPU else f"{device.scope} power limit"
    try:
        device.set_w(watts)
    except Exception as err:  # noqa: BLE001 - vendor exception types
        if device.lacks_privilege(err):
            raise PowerLimitError(
                f"setting the {limit} of {device.device} through {device.library} needs "
                f"{device.privilege}; this process has no such privilege ({one_line(err)})") from None
        raise PowerLimitError(f"{device.library} refused the {limit} {watts:g} W on "
                              f"{device.device} ({one_line(err)}){device.refusal_advice()}") from None

