"""amdsmi as a job's own processes see it in the tests that run them: the
fake amdsmi of tests/jpwr/jpwr_fakes.py with its GPUs kept in the JSON file
$CARAML_FAKE_AMDSMI_STATE (a list of GPUs, each as FakeAmdSmi takes it), so
that a cap one process sets is seen by the test and by every other process.
A test puts this folder first on PYTHONPATH; where the variable is not set,
the binding is not installed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.jpwr.jpwr_fakes import FakeAmdSmi

STATE_ENV = "CARAML_FAKE_AMDSMI_STATE"
if STATE_ENV not in os.environ:
    raise ImportError(f"the fake amdsmi has no state ({STATE_ENV} is not set)")


class FileAmdSmi(FakeAmdSmi):
    def __init__(self, path: Path) -> None:
        self._path = path
        super().__init__([])

    @property
    def gpus(self) -> list[dict]:
        self._loaded = json.loads(self._path.read_text())
        return self._loaded

    @gpus.setter
    def gpus(self, _value) -> None:
        pass  # the file holds them

    def caps_changed(self) -> None:
        temporary = self._path.with_suffix(f".{os.getpid()}")
        temporary.write_text(json.dumps(self._loaded))
        os.replace(temporary, self._path)


sys.modules[__name__] = FileAmdSmi(Path(os.environ[STATE_ENV]))
