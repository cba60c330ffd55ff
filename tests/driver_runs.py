"""What the driver tests of both benchmarks share: the CARAML lines a driver
prints, parsed, and a driver run as a child process that a test can signal
mid-run without losing any of its output."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable


def parse_caraml(text: str) -> dict:
    """CARAML lines by scope: `global`, `rank 0`, ... map to their key=value
    pairs, `stop`, `warning` (the last) and `ERROR` to their text."""
    lines = {}
    for m in re.finditer(r"^CARAML ([^:]+): (.*)$", text, re.MULTILINE):
        scope, body = m.groups()
        lines[scope] = body if scope in ("stop", "warning", "ERROR") else dict(
            kv.split("=", 1) for kv in body.split())
    return lines


class Child:
    """A command whose stdout and stderr are read by threads as they come.
    A test can wait for a line, signal the command and then read all its
    output: reading the pipe up to a line and then calling communicate()
    would drop what the file object had already buffered."""

    def __init__(self, cmd: list[str], cwd):
        # A session of its own: the test may signal the whole group, as Slurm
        # does, and a failed test kills the group, torchrun's workers included.
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self._out: list[str] = []
        self._err: list[str] = []
        self._changed = threading.Condition()
        self._readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                         for stream, into in ((self.proc.stdout, self._out),
                                              (self.proc.stderr, self._err))]
        for reader in self._readers:
            reader.start()

    def _read(self, stream, into: list[str]) -> None:
        for line in stream:
            with self._changed:
                into.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, seen: Callable[[list[str]], bool], what: str, timeout: float = 300) -> None:
        """Waits until `seen(stdout lines so far)` holds."""
        with self._changed:
            ok = self._changed.wait_for(
                lambda: seen(self._out) or not self._readers[0].is_alive(), timeout)
            if not (ok and seen(self._out)):
                raise AssertionError(f"no {what} in the output:\n{''.join(self._out)}"
                                     f"\n{''.join(self._err)}")

    def finish(self, timeout: float = 300) -> tuple[int, str, str]:
        """Waits for the command's end: exit status, all of stdout, all of stderr."""
        code = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        return code, "".join(self._out), "".join(self._err)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def count_lines(prefix: str, n: int) -> Callable[[list[str]], bool]:
    """A `Child.wait_for` condition: `n` lines that start with `prefix`."""
    return lambda lines: sum(line.startswith(prefix) for line in lines) >= n


def worker_with_rank(launcher_pid: int, rank: int) -> int:
    """The pid of the process under `launcher_pid` (torchrun) with RANK=rank."""
    todo = [launcher_pid]
    while todo:
        pid = todo.pop()
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                todo += [int(c) for c in f.read().split()]
        with open(f"/proc/{pid}/environ", "rb") as f:
            if f"RANK={rank}".encode() in f.read().split(b"\0"):
                return pid
    raise LookupError(f"no process with RANK={rank} under {launcher_pid}")
