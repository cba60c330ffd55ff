"""The job's power guard: a small process per node that the job script
starts before the launcher (aux/job.sh.in) and that puts back every GPU
power limit the job changed, however the job's processes end: at the end
of the run, by a signal, or by SIGKILL, an abort, a segfault or the OOM
killer, after which no code of a training process runs.

    python -m caraml.job.power_guard guard --dir DIR [--watch-pid PID]
    python -m caraml.job.power_guard wait --dir DIR --nodes N [--timeout-s S]
    python -m caraml.job.power_guard reset

`guard` records the limit of every GPU this process sees, at every scope
the device reports (the GPU's own; a GH200 superchip's module), and the
device's default, into DIR/power_guard.<host>, and then waits: for a stop
signal (USR2: the job script's once its launcher has ended; TERM: scancel's
and the time limit's; USR1: the warning before it; INT, HUP) or, with
--watch-pid, for that process (the job script) to be gone. It then sets each limit that differs from the one
it found back to that one, reads it again, writes what it did and ends:

    CARAML power guard: host=n1 device=gpu0 scope=gpu found_w=250 default_w=250
    CARAML power guard ready: host=n1 limits=1
    CARAML power guard restored: host=n1 device=gpu0 scope=gpu found_w=250 was_w=180 reads_w=250 restored=yes
    CARAML power guard end: host=n1 restored=yes when=SIGTERM

(`restored=no` where a limit did not read back as found: the node needs a
hand, or the epilog). A node without a GPU whose limit it can read writes
`ready ... limits=0` and ends at once.

`wait` waits until N nodes' guards are ready (the job script, before the
launcher, so that no rank sets a limit before its guard has read it), and
after S seconds says which are not and lets the job go on.

`reset` is the Slurm epilog's (site/slurm-epilog-power-limits.sh): it sets
every GPU of the node, at every scope it reports, to its default limit,
reads it again and exits 1 where one did not take (Slurm then drains the
node).

Standard library only but for the vendor binding each GPU needs (jpwr's
device layer): the job script's python3 runs `wait`."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from caraml import report
from caraml.power_limit import GUARD_END as END
from caraml.power_limit import GUARD_FILES as FILE_PREFIX
from caraml.power_limit import GUARD_FOUND as FOUND
from caraml.power_limit import GUARD_READY as READY
from caraml.power_limit import GUARD_RESTORED as RESTORED
from caraml.power_limit import line_watts
from jpwr.gpu.power_limit import (
    GPU,
    MODULE,
    TOLERANCE_W,
    Library,
    PowerLimitError,
    open_library,
    put_back,
    read,
)

# the epilog's line (site/slurm-epilog-power-limits.sh)
RESET = "power reset"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
# the visibility variables a reset of the whole node leaves out
VISIBILITY = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


@dataclass
class Held:
    """One limit the guard holds: a device at a scope, as found."""

    index: int
    scope: str
    device: str
    found_w: float
    default_w: float | None


def _scopes(lib: Library, index: int) -> Iterator[tuple[str, Library, float, float | None]]:
    """(scope, the library pointed there, its limit, its default) for each
    scope the device reports a limit at; a scope it reports none at is left
    out (the GPU scope of a device without a limit of its own, a module
    scope off GH200)."""
    for scope in (GPU, MODULE) if lib.library == "NVML" else (GPU,):
        try:
            device = lib.select(index, scope)
            limit = read(device, "", device.limit_w)
        except PowerLimitError:
            continue
        try:
            default = device.default_w()
        except Exception:  # noqa: BLE001 - vendor exception types: no default reported
            default = None
        yield scope, device, limit, default


def found_limits(lib: Library) -> list[Held]:
    return [Held(index, scope, device.device, limit, default)
            for index in lib.visible for scope, device, limit, default in _scopes(lib, index)]


class Record:
    """The guard's file, written whole each time (a reader never sees half of it)."""

    def __init__(self, folder: Path, host: str) -> None:
        self.path = folder / f"{FILE_PREFIX}{host}"
        self.lines: list[str] = []

    def add(self, what: str, **fields: object) -> None:
        self.lines.append(report.line(what, fields))
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        partial.write_text("\n".join(self.lines) + "\n")
        os.replace(partial, self.path)


def _ender(watch_pid: int | None) -> tuple[threading.Event, list[str]]:
    """An event set by the first stop signal, or when `watch_pid` is gone;
    the list gets what ended the wait."""
    done, why = threading.Event(), []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        why.append(signal.Signals(signum).name)
        done.set()
    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    if watch_pid is not None:
        def watch() -> None:
            while not done.is_set():
                try:
                    os.kill(watch_pid, 0)
                except ProcessLookupError:
                    why.append("job-script-gone")
                    done.set()
                except PermissionError:
                    pass  # there, another user's: not ours to watch
                done.wait(0.2)
        threading.Thread(target=watch, daemon=True).start()
    return done, why


def guard(folder: Path, watch_pid: int | None) -> int:
    host = socket.gethostname()
    record = Record(folder, host)
    # the signals count from here: one before the record is written still ends the guard
    done, why = _ender(watch_pid)
    try:
        lib = open_library()
    except PowerLimitError as err:
        record.add(READY, host=host, limits=0, why=report.word(str(err)[:120]))
        record.add(END, host=host, restored="none", when="-")
        return 0
    try:
        held = found_limits(lib)
        for h in held:
            record.add(FOUND, host=host, device=h.device, scope=h.scope, found_w=line_watts(h.found_w),
                       default_w=line_watts(h.default_w))
        record.add(READY, host=host, limits=len(held))
        if held:
            done.wait()
        ok = all([_put_back(lib, h, record, host) for h in held])
        record.add(END, host=host, restored="yes" if ok else "no" if held else "none",
                   when=why[0] if why else "-")
        return 0 if ok else 1
    finally:
        lib.close()


def _put_back(lib: Library, h: Held, record: Record, host: str) -> bool:
    """Sets a limit back to the one found where it differs, read again."""
    device = lib.select(h.index, h.scope)
    try:
        was = read(device, "", device.limit_w)
    except PowerLimitError as err:
        was, ok = None, False
        report.warning(str(err))
    else:
        ok = abs(was - h.found_w) <= TOLERANCE_W or put_back(device, h.found_w)
    try:
        now = device.limit_w()
    except Exception:  # noqa: BLE001 - vendor exception types
        now, ok = None, False
    record.add(RESTORED, host=host, device=h.device, scope=h.scope, found_w=line_watts(h.found_w),
               was_w=line_watts(was), reads_w=line_watts(now), restored="yes" if ok else "no")
    return ok


def wait(folder: Path, nodes: int, timeout_s: float) -> int:
    """Waits until `nodes` guards wrote their ready line; says which are not
    after timeout_s and returns 0 either way (the job goes on)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ready = sorted(p.name.removeprefix(FILE_PREFIX) for p in folder.glob(f"{FILE_PREFIX}*")
                       if f"CARAML {READY}:" in p.read_text(errors="replace"))
        if len(ready) >= nodes:
            return 0
        if time.monotonic() > deadline:
            report.warning(f"the power guard is ready on {len(ready)} of {nodes} nodes "
                           f"({' '.join(ready) or 'none'}) after {timeout_s:g} s: a limit a "
                           "killed rank leaves on the others is put back by nobody but the "
                           "epilog (docs/power_limits.md)")
            return 0
        time.sleep(0.1)


def reset() -> int:
    """Every GPU of the node at every scope it reports back at its default;
    1 where one is not at its default afterwards."""
    for variable in VISIBILITY:
        os.environ.pop(variable, None)
    host = socket.gethostname()
    try:
        lib = open_library()
    except PowerLimitError as err:
        report.emit(RESET, host=host, devices=0, why=report.word(str(err)[:120]))
        return 0
    failed = 0
    try:
        for index in lib.everything:
            for scope, device, limit, default in _scopes(lib, index):
                ok = default is not None and (abs(limit - default) <= TOLERANCE_W
                                              or put_back(device, default))
                failed += not ok
                report.write_line(report.line(RESET, {
                    "host": host, "device": device.device, "scope": scope, "was_w": line_watts(limit),
                    "default_w": line_watts(default), "reset": "yes" if ok else "no"}))
    finally:
        lib.close()
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    g = sub.add_parser("guard", help="record the limits, put them back when the job ends")
    g.add_argument("--dir", type=Path, default=Path("."))
    g.add_argument("--watch-pid", type=int, help="end when this process is gone (the job script)")
    w = sub.add_parser("wait", help="wait until every node's guard is ready")
    w.add_argument("--dir", type=Path, default=Path("."))
    w.add_argument("--nodes", type=int, required=True)
    w.add_argument("--timeout-s", type=float, default=120.0)
    sub.add_parser("reset", help="every GPU of the node to its default limit (the epilog)")
    args = ap.parse_args(argv)
    if args.command == "guard":
        return guard(args.dir, args.watch_pid)
    if args.command == "wait":
        return wait(args.dir, args.nodes, args.timeout_s)
    return reset()


if __name__ == "__main__":
    sys.exit(main())
