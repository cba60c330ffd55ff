"""A GPU's power limit for the length of a job: read the limit the device
has and its default, check the one asked for against the device's range and
the system's, set it, read back what the device reports, and put the
previous limit back whatever ends the job, reading it again to be sure it
took. A limit left changed is a node left broken for the next user, so the
previous limit is restored

- when the block ends, normally or by an exception;
- at once, from another thread, by whoever holds the block's Limit
  (Limit.restore_now: the driver does so at the first stop signal, while its
  step still runs);
- on a signal whose action is still the default one (which would end the
  process without unwinding): the limit is put back first, then the signal
  ends the process as it would have (a program that handles its stop
  signals itself leaves its work and ends the block normally);
- at interpreter exit, should the block not have ended by then.

SIGKILL (Slurm's last word after its KillWait, the OOM killer), an abort or
a segfault cannot be answered from inside the process: the job's power
guard (caraml/job/power_guard.py) puts the limit back from outside it.

NVIDIA GPUs through NVML (nvidia-ml-py: nvmlDeviceGetPowerManagementLimit,
...Constraints, ...DefaultLimit, nvmlDeviceSetPowerManagementLimit, all in
milliwatts), AMD GPUs through amdsmi (amdsmi_get_power_cap_info,
amdsmi_set_power_cap, in microwatts). Each process sets one device: the one
the launcher gives its local rank, counted the way the runtime counts the
visible devices (CUDA_VISIBLE_DEVICES for NVIDIA; ROCR_VISIBLE_DEVICES,
then HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES for AMD, as HIP applies
them).

A limit has a scope (SCOPES):

- `gpu`: the GPU's own limit (above);
- `module`: a Grace Hopper superchip's limit for the whole of it, which NVML
  sets through nvmlDeviceSetPowerManagementLimit_v2 at
  NVML_POWER_SCOPE_MODULE and reports in the field values
  NVML_FI_DEV_POWER_REQUESTED_LIMIT (the limit a client set), ..._MIN_LIMIT,
  ..._MAX_LIMIT and ..._DEFAULT_LIMIT read at that scope. A binding or
  driver without these, or a device that reports no module limit, refuses
  the module scope in one line; nothing falls back to the GPU's limit. As
  nvidia-ml-py's _v2 call does not pass NVML's return code on (13.615), a
  module limit is read back after each set, and one the device did not take
  is a refusal;
- `package`: the limit of an accelerator package that holds several devices
  (an MI250 card of two GCDs), which amdsmi sets and reads through the
  package's first device. `devices_per_package` consecutive devices, in the
  library's order, make one package; of the processes on one package only
  the one on its first visible device sets the limit (Limit.owner)."""

from __future__ import annotations

import atexit
import math
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, NoReturn, Protocol

from jpwr.gpu.visible import cuda_order, hip_variables, hip_visible, restrict
from jpwr.method import MethodUnavailable, import_binding
from jpwr.notice import one_line, say

# The signals that end a process by default and that a job meets: scancel
# and the time limit (TERM), the time-limit warning (USR1, aux/job.sh.in),
# USR2 and a lost terminal (HUP). INT raises KeyboardInterrupt, which unwinds.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)
# How far a limit read back may lie from the one set and still be it: the
# devices keep milliwatts (NVML) or microwatts (amdsmi), some round to a watt
TOLERANCE_W = 1.0


class PowerLimitError(RuntimeError):
    """The limit cannot be read or set: no library, no privilege, a limit out
    of range, a device without a limit of its own. The message is one line
    that says what to do."""


class PrivilegeMissing(PowerLimitError):
    """The device refused to set a limit for want of a privilege: every
    other process of the node would be refused the same."""


def _local(picked: list[int], local_index: int, listed: int, library: str, variables: str) -> int:
    """The library's index of the device a local rank trains on: its
    position among the visible ones (one device per task: the only one)."""
    if not picked:
        raise MethodUnavailable(f"{library} lists {listed} GPUs and {variables} leave none")
    return picked[local_index % len(picked)]


GPU, MODULE, PACKAGE = "gpu", "module", "package"
SCOPES = (GPU, MODULE, PACKAGE)
# NVML's fields of a scope's limit: the one a client set, the lowest and highest settable, the default
_MODULE_FIELDS = ("NVML_FI_DEV_POWER_REQUESTED_LIMIT", "NVML_FI_DEV_POWER_MIN_LIMIT",
                  "NVML_FI_DEV_POWER_MAX_LIMIT")
_DEFAULT_FIELD = "NVML_FI_DEV_POWER_DEFAULT_LIMIT"
_MODULE_CALLS = ("nvmlDeviceSetPowerManagementLimit_v2", "nvmlDeviceGetFieldValues",
                 "NVML_POWER_SCOPE_MODULE", *_MODULE_FIELDS)
_AT_GPU_SCOPE = "or give the points in watts of the GPU limit at gpu scope (CARAML_POWER_LIMIT_SCOPE=gpu)"


class Scoped(Protocol):
    """What names a limit: its device and its scope."""

    device: str
    scope: str


class Device(Scoped, Protocol):
    """A library pointed at one device and scope (select): its limit read
    and set in watts."""

    library: str
    owner: bool

    def limit_w(self) -> float: ...
    def range_w(self) -> tuple[float, float]: ...
    def default_w(self) -> float: ...
    def set_w(self, watts: float) -> None: ...
    def lacks_privilege(self, err: BaseException) -> bool: ...
    def refusal_advice(self) -> str: ...
    def close(self) -> None: ...


class _Nvml:
    """NVML, pointed at one device and scope at a time (select)."""

    library = "NVML"
    owner = True  # NVML's limits are each device's own

    def __init__(self) -> None:
        nvml = import_binding("pynvml", "NVML", "pip install nvidia-ml-py")
        try:
            nvml.nvmlInit()
        except Exception as err:  # NVMLError subclasses, OSError
            raise MethodUnavailable(f"NVML did not start ({one_line(err)})") from err
        self._nvml = nvml
        try:
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            uuids = [nvml.nvmlDeviceGetUUID(h) for h in self._handles]
            uuids = [u.decode() if isinstance(u, bytes) else str(u) for u in uuids]
            buses = [nvml.nvmlDeviceGetPciInfo(h).busId for h in self._handles]
            names = [nvml.nvmlDeviceGetName(h) for h in self._handles]
            order = cuda_order([b.decode() if isinstance(b, bytes) else str(b) for b in buses],
                               [str(n) for n in names], "NVML")
            self.visible = restrict(order, uuids, "CUDA_VISIBLE_DEVICES", "NVML")
        except Exception:
            nvml.nvmlShutdown()
            raise
        self.everything = list(range(len(self._handles)))
        self.variables = "CUDA_VISIBLE_DEVICES"
        self.scope, self.device, self._handle = GPU, "", None

    def select(self, index: int, scope: str = GPU, devices_per_package: int = 1) -> _Nvml:
        """This object, pointed at the library's device `index` and `scope`."""
        if scope == PACKAGE:
            raise PowerLimitError("NVML sets no package power limit (a GH200 superchip's is the "
                                  "module scope); give the points at gpu or module scope")
        if scope == MODULE:
            missing = [name for name in _MODULE_CALLS if not hasattr(self._nvml, name)]
            if missing:
                raise PowerLimitError(
                    f"the module power limit needs NVML's power scopes, and this nvidia-ml-py lacks "
                    f"{', '.join(missing)}; install a newer nvidia-ml-py (and driver) {_AT_GPU_SCOPE}")
        self.scope, self.device, self._handle = scope, f"gpu{index}", self._handles[index]
        return self

    def _module_mw(self, fields: tuple[str, ...] = _MODULE_FIELDS) -> list[int]:
        """The module scope's values of `fields` in mW: PowerLimitError where
        the device reports none of them."""
        nvml = self._nvml
        scope = nvml.NVML_POWER_SCOPE_MODULE
        try:
            values = nvml.nvmlDeviceGetFieldValues(
                self._handle, [(getattr(nvml, name), scope) for name in fields])
        except Exception as err:  # noqa: BLE001 - NVMLError subclasses
            self._refuse_module(one_line(err))
        out = []
        for name, value in zip(fields, values):
            if value.nvmlReturn != getattr(nvml, "NVML_SUCCESS", 0):
                self._refuse_module(f"{name}: NVML error {value.nvmlReturn}")
            out.append(value.value.uiVal)
        return out

    def _refuse_module(self, why: str) -> NoReturn:
        raise PowerLimitError(
            f"{self.device} reports no module power limit through NVML ({why}): this driver or "
            f"device sets no module limit; ask the centre for a driver that does {_AT_GPU_SCOPE}")

    def limit_w(self) -> float:
        if self.scope == MODULE:
            return self._module_mw()[0] * 1e-3
        return float(self._nvml.nvmlDeviceGetPowerManagementLimit(self._handle)) * 1e-3

    def range_w(self) -> tuple[float, float]:
        if self.scope == MODULE:
            _, low, high = self._module_mw()
        else:
            low, high = self._nvml.nvmlDeviceGetPowerManagementLimitConstraints(self._handle)
        return low * 1e-3, high * 1e-3

    def default_w(self) -> float:
        if self.scope == MODULE:
            if not hasattr(self._nvml, _DEFAULT_FIELD):
                self._refuse_module(f"this nvidia-ml-py lacks {_DEFAULT_FIELD}")
            return self._module_mw((_DEFAULT_FIELD,))[0] * 1e-3
        return float(self._nvml.nvmlDeviceGetPowerManagementDefaultLimit(self._handle)) * 1e-3

    def set_w(self, watts: float) -> None:
        milliwatts = round(watts * 1000)
        if self.scope == GPU:
            self._nvml.nvmlDeviceSetPowerManagementLimit(self._handle, milliwatts)
            return
        self._nvml.nvmlDeviceSetPowerManagementLimit_v2(
            self._handle, self._nvml.NVML_POWER_SCOPE_MODULE, milliwatts)
        taken = self._module_mw()[0]
        if abs(taken - milliwatts) > TOLERANCE_W * 1000:  # a device may round a fractional point
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
    """amdsmi, pointed at one device (or package) at a time (select)."""

    library = "amdsmi"

    def __init__(self) -> None:
        lib = import_binding("amdsmi", "amdsmi", "amdsmi ships with ROCm")
        try:
            lib.amdsmi_init()
        except Exception as err:  # vendor exception types
            raise MethodUnavailable(f"amdsmi did not start ({one_line(err)})") from err
        self._lib = lib
        try:
            self._handles = lib.amdsmi_get_processor_handles()
            uuids = [str(lib.amdsmi_get_gpu_device_uuid(h)) for h in self._handles]
            self.visible = hip_visible(uuids, "amdsmi")
        except Exception:
            lib.amdsmi_shut_down()
            raise
        self.everything = list(range(len(self._handles)))
        self.variables = " then ".join(hip_variables())
        self.scope, self.device, self._handle, self.owner = GPU, "", None, True

    def select(self, index: int, scope: str = GPU, devices_per_package: int = 1) -> _AmdSmi:
        """This object, pointed at the library's device `index`, or at the
        package that holds it (scope package): its first device's handle,
        owned by the first visible device of the package."""
        if scope == MODULE:
            raise PowerLimitError("amdsmi sets no module power limit; give the points at gpu scope "
                                  "(CARAML_POWER_LIMIT_SCOPE=gpu)")
        self.scope, self.device, self._handle, self.owner = scope, f"gpu{index}", self._handles[index], True
        if scope == PACKAGE:
            per = max(1, devices_per_package)
            first = index - index % per
            members = range(first, min(first + per, len(self._handles)))
            self.device = "+".join(f"gpu{i}" for i in members)
            self._handle = self._handles[first]
            self.owner = index == next(i for i in self.visible if i in members)
        return self

    def _info(self) -> dict[str, float]:
        """The power cap's values in microwatts."""
        return {k: float(v) for k, v in self._lib.amdsmi_get_power_cap_info(self._handle).items()
                if isinstance(v, (int, float))}

    def limit_w(self) -> float:
        return self._info()["power_cap"] * 1e-6

    def range_w(self) -> tuple[float, float]:
        info = self._info()
        return info["min_power_cap"] * 1e-6, info["max_power_cap"] * 1e-6

    def default_w(self) -> float:
        return self._info()["default_power_cap"] * 1e-6

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


Library = _Nvml | _AmdSmi
LIBRARIES: dict[str, type[Library]] = {"nvml": _Nvml, "amdsmi": _AmdSmi}


def _opened(name: str, reasons: list[str]) -> Library | None:
    """Library `name` started, or None with the reason it is not here."""
    try:
        return LIBRARIES[name]()
    except MethodUnavailable as err:
        reasons.append(str(err))
    except Exception as err:  # noqa: BLE001 - a vendor error while listing the GPUs
        raise PowerLimitError(f"{name} could not list this node's GPUs ({one_line(err)})") from None
    return None


def _none_here(reasons: list[str]) -> PowerLimitError:
    return PowerLimitError("no GPU whose power limit can be set here (" + "; ".join(reasons) + ")")


def open_library(library: str = "auto") -> Library:
    """The named library, or the first of NVML and amdsmi that works here
    ("auto"), pointed at no device yet (its `visible` devices: those the
    process sees; `everything`: the node's); PowerLimitError where none works."""
    reasons: list[str] = []
    for name in list(LIBRARIES) if library == "auto" else [library]:
        lib = _opened(name, reasons)
        if lib is not None:
            return lib
    raise _none_here(reasons)


def open_device(local_index: int, library: str = "auto", scope: str = GPU,
                devices_per_package: int = 1) -> Library:
    """The device of local rank `local_index` in the named library, or in
    the first of NVML and amdsmi that works here ("auto"), its limit at
    `scope`."""
    reasons: list[str] = []
    for name in list(LIBRARIES) if library == "auto" else [library]:
        lib = _opened(name, reasons)
        if lib is None:
            continue
        try:
            index = _local(lib.visible, local_index, len(lib.everything), lib.library, lib.variables)
            return lib.select(index, scope, devices_per_package)
        except MethodUnavailable as err:
            lib.close()
            reasons.append(str(err))
        except BaseException:
            lib.close()
            raise
    raise _none_here(reasons)


@dataclass
class Limit:
    """What a block did to its device's limit, in watts."""

    device: str
    asked_w: float | None  # None: the limit was left as it was
    before_w: float
    reported_w: float
    restored: bool = False
    scope: str = GPU  # SCOPES: the GPU's limit, its superchip module's or its package's
    default_w: float | None = None  # the device's default at that scope; None: not reported
    owner: bool = True  # whether this process sets the limit (a package's: one of its processes)
    # puts the previous limit back now, from any thread; True once it is back
    restore_now: Callable[[], bool] = field(default=lambda: True, repr=False)


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


def scope_name(device: Scoped) -> str:
    """The device and scope a message names: `gpu0`, `the module of gpu0`."""
    return device.device if device.scope == GPU else f"the {device.scope} of {device.device}"


def read(device: Device, what: str, call: Callable[[], Any]) -> Any:
    """A reading of the device's limit, its range or its default; a vendor
    error (NVML's Not Supported on a vGPU, a MIG instance or an MI250's
    second GCD) as PowerLimitError in one line."""
    try:
        return call()
    except PowerLimitError:
        raise
    except Exception as err:  # noqa: BLE001 - vendor exception types
        raise PowerLimitError(
            f"{device.library} cannot read the power limit{what} of {scope_name(device)} "
            f"({one_line(err)}): a device without a limit of its own (a vGPU or a MIG instance or "
            "the second GCD of an MI250) cannot be limited here; run on whole GPUs or at package "
            "scope on an MI250") from None


def default_or_none(device: Device) -> float | None:
    """The device's default limit at its scope; None where it reports none."""
    try:
        return device.default_w()
    except Exception:  # noqa: BLE001 - vendor exception types, PowerLimitError
        return None


class _Restorer:
    """Puts the previous limit back once, from whichever end comes first
    (any thread), and reads it again to be sure."""

    def __init__(self, device: Device, before_w: float) -> None:
        self._device, self._before_w = device, before_w
        self.changed = False  # set once a new limit is asked for
        self._handlers: dict[int, signal.Handlers | Callable[[int, FrameType | None], Any] | int | None] = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._result = True

    def __call__(self) -> bool:
        with self._lock:
            if self.changed:
                self._result = put_back(self._device, self._before_w)
                # a limit that did not go back is tried again at the next end
                self.changed = not self._result
            return self._result

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
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


def put_back(device: Device, watts: float) -> bool:
    """Sets the device's limit to `watts` and reads it again: True where it
    reads `watts`; a warning that says to set it by hand where not."""
    try:
        device.set_w(watts)
        now = device.limit_w()
    except Exception as err:  # noqa: BLE001 - vendor exception types
        say(f"warning: the power limit of {scope_name(device)} could not be put back to "
            f"{watts:g} W ({one_line(err)}); set it by hand")
        return False
    if abs(now - watts) > TOLERANCE_W:
        say(f"warning: the power limit of {scope_name(device)} reads {now:g} W after putting "
            f"{watts:g} W back; set it by hand")
        return False
    return True


@contextmanager
def limited(asked_w: float | None, *, local_index: int = 0, library: str = "auto",
            system_range: tuple[float | None, float | None] | None = None,
            scope: str = GPU, devices_per_package: int = 1,
            device: Device | None = None) -> Iterator[Limit]:
    """Sets this process's device to asked_w watts at `scope` (SCOPES) for
    the block and puts the previous limit back at its end; asked_w None, or
    a process that does not own its package's limit, sets nothing and
    reports the limit the device has. PowerLimitError (one line) where no
    library works, the scope is not offered, the limit cannot be read or is
    out of range, or setting it is not allowed. `device` stands in for the
    opened device (tests)."""
    opened: Device = device or open_device(local_index, library, scope, devices_per_package)
    try:
        before = read(opened, "", opened.limit_w)
        limit = Limit(opened.device, asked_w, before, before, scope=opened.scope,
                      default_w=default_or_none(opened), owner=opened.owner)
        if asked_w is None or not opened.owner:
            limit.restored = True
            yield limit
            return
        check_range(asked_w, read(opened, " range", opened.range_w), system_range, scope_name(opened))
        restore = _Restorer(opened, before)
        restore.arm()
        try:
            restore.changed = True
            try:
                _set(opened, asked_w)
            except BaseException:
                # a set refused outright changed nothing; one that went half
                # way (a module limit that reads back wrong) is put back
                with suppress(Exception):  # unreadable: put back, to be safe
                    restore.changed = abs(opened.limit_w() - before) > TOLERANCE_W
                raise
            limit.restore_now = restore
            limit.reported_w = read(opened, "", opened.limit_w)
            yield limit
        finally:
            limit.restored = restore()
            restore.disarm()
    finally:
        opened.close()


def _set(device: Device, watts: float) -> None:
    limit = "power limit" if device.scope == GPU else f"{device.scope} power limit"
    try:
        device.set_w(watts)
    except Exception as err:  # noqa: BLE001 - vendor exception types
        if device.lacks_privilege(err):
            raise PrivilegeMissing(
                f"setting the {limit} of {device.device} through {device.library} needs root or "
                f"a power-management privilege and this process has none ({one_line(err)})") from None
        raise PowerLimitError(f"{device.library} refused the {limit} {watts:g} W on "
                              f"{device.device} ({one_line(err)}){device.refusal_advice()}") from None
