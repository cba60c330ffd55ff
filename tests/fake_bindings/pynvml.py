"""nvidia-ml-py as a job's own processes see it in the end-to-end tests: the
fake NVML of tests/jpwr/jpwr_fakes.py (with the power scopes) with its GPUs
kept in the JSON file $CARAML_FAKE_NVML_STATE, so that a limit a job sets
and puts back is seen by the test (and by every process of the job, the
power guard's too) after the job has ended; the state's `set_mw` lists
every limit set, in order. A test puts this folder first on PYTHONPATH;
where the variable is not set, the binding is not installed.

The GPU draws 60 % of its power limit, and its energy counter counts what
it drew since boot, at each limit for as long as that held. What a job
meets at a limit is the state's `at_limit_mw` entry for that limit, in
milliwatts:
  refuse  setting the limit fails as without privilege;
  term    the process gets SIGTERM when the timed window begins (jpwr's
          begin_window reads the energy counter there), as from scancel;
  raise   once the timed window has begun, the next power reading (the
          sampler's thread) makes the training step (the main thread)
          raise, as a GPU that fails;
  kill    the process kills itself with SIGKILL when the timed window
          begins, as the OOM killer or `kill -9` would;
  stuck   as kill, and the GPU then refuses the next set (the limit stays:
          the power guard cannot put it back either); once."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from tests.jpwr.jpwr_fakes import FakeScopedNvml

STATE_ENV = "CARAML_FAKE_NVML_STATE"
if STATE_ENV not in os.environ:
    raise ImportError(f"the fake NVML has no state ({STATE_ENV} is not set)")


class FakeGpuFailed(RuntimeError):
    pass


class FileNvml(FakeScopedNvml):
    def __init__(self, path: Path) -> None:
        self._path = path
        self._loaded: list[dict] = []
        self._window_begun = False
        self._raised = False
        super().__init__([])

    @property
    def gpus(self) -> list[dict]:
        self._loaded = json.loads(self._path.read_text())["gpus"]
        return self._loaded

    @gpus.setter
    def gpus(self, _value) -> None:
        pass  # the file holds them

    def _action(self, handle) -> str:
        gpu = self.gpus[handle]
        return json.loads(self._path.read_text()).get("at_limit_mw", {}).get(str(gpu["limit_mw"]), "")

    @staticmethod
    def _energy_mj(gpu: dict, now: float) -> float:
        """What the GPU drew since boot: at each limit for as long as it held."""
        return gpu.get("energy_banked_mj", 0) + 0.6 * gpu["limit_mw"] * (now - gpu.get("limit_since", 0.0))

    def limits_changed(self) -> None:
        state = json.loads(self._path.read_text())
        now = time.monotonic()
        for before, after in zip(state["gpus"], self._loaded):
            if before["limit_mw"] != after["limit_mw"]:  # the counter goes on from what it drew so far
                after["energy_banked_mj"], after["limit_since"] = self._energy_mj(before, now), now
        state["gpus"] = self._loaded
        # every limit set, in order, for the test to read
        state.setdefault("set_mw", []).extend(call[1] for call in self.limit_calls)
        self.limit_calls.clear()
        temporary = self._path.with_suffix(f".{os.getpid()}")
        temporary.write_text(json.dumps(state))
        os.replace(temporary, self._path)

    def nvmlDeviceSetPowerManagementLimit(self, handle, milliwatts):
        state = json.loads(self._path.read_text())
        if state.get("at_limit_mw", {}).get(str(milliwatts)) == "refuse":
            raise self.NVMLError(self.NVML_ERROR_NO_PERMISSION)
        if state.get("refuse_next_set"):
            state["refuse_next_set"] = False
            self._path.write_text(json.dumps(state))
            raise self.NVMLError(self.NVML_ERROR_NO_PERMISSION)
        super().nvmlDeviceSetPowerManagementLimit(handle, milliwatts)

    def _power_mw(self, handle) -> int:
        return int(0.6 * self.gpus[handle]["limit_mw"])

    def nvmlDeviceGetPowerUsage(self, handle):
        if self._window_begun and not self._raised and self._action(handle) == "raise":
            self._raised = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(threading.main_thread().ident), ctypes.py_object(FakeGpuFailed))
        return self._power_mw(handle)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self._window_begun and _called_from("begin_window"):
            self._window_begun = True
            action = self._action(handle)
            if action == "term":
                os.kill(os.getpid(), signal.SIGTERM)
            if action == "stuck":  # once: the next job at this limit is one that found it left
                state = json.loads(self._path.read_text())
                state["refuse_next_set"] = True
                del state["at_limit_mw"][str(self.gpus[handle]["limit_mw"])]
                self._path.write_text(json.dumps(state))
            if action in ("kill", "stuck"):
                os.kill(os.getpid(), signal.SIGKILL)
        return int(self._energy_mj(self.gpus[handle], time.monotonic()))


def _called_from(function: str) -> bool:
    """Whether a caller up the stack is `function`. The scope reads the
    counters as it starts too; the timed window begins only where the
    driver calls jpwr's begin_window."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


sys.modules[__name__] = FileNvml(Path(os.environ[STATE_ENV]))
