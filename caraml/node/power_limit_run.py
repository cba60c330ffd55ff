"""A run's GPU power limits, on its node: what the driver core
(caraml/node/driver.py) does with them. Every rank

- records, at the start of every run (plain runs too) and before anything
  is set, the limit its device has and the device's default (nothing where
  no GPU library works here, as on a CPU host):

      CARAML power limit at start: rank=0 device=gpu0 scope=gpu limit_w=250 default_w=250

- for a sweep's point (--power-limit) sets its device's limit (mode suite)
  or checks that the centre set it (mode external), and says so:

      CARAML power limit: rank=0 device=gpu0 scope=gpu mode=suite asked=300 asked_w=300 before_w=400 ...
      ... reported_w=300

- puts a limit it set back at the first stop signal, at once, while the
  step it is in still runs (a thread woken by the signal), and when the run
  ends however it ends (again only where the first try failed), saying so
  each time; the last line of a rank is its word:

      CARAML power limit restored: rank=0 device=gpu0 restored=yes limit_w=400 when=SIGTERM

A rank that cannot read or set its limit fails the run before training on
every rank with one line (the driver core's `agreed`), with every limit
already set put back. A job refused the privilege to set a limit notes it
in the run's folder (caraml/power_limit.py, REFUSED_FILE): the sweep's later
points end at once with the same line instead of queueing to fail alike.
The job's power guard (caraml/job/power_guard.py) puts back what a rank that
is killed outright cannot."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from caraml import power_limit, report
from caraml.node.dist import Dist
from caraml.node.options import EnergyOptions
from caraml.node.stopping import STOP_SIGNALS
from caraml.power_limit import line_watts
from caraml.report import BenchmarkInputError

if TYPE_CHECKING:
    from jpwr.gpu.power_limit import Limit

# what a centre provides where jobs may not set limits (docs/power_limits.md)
CENTRE = ("the centre must provide jobs that may set GPU power limits (e.g. a reservation whose "
          "jobs run as root) or set each point's limit itself before the job (a Slurm prolog or "
          "SPANK option; then CARAML_POWER_LIMIT_MODE=external; docs/power_limits.md)")


def record_at_start(opts: EnergyOptions, dist: Dist) -> None:
    """This rank's device's limit and default, before anything is set. A
    run without a point records what it can; a point's run fails (one line)
    where its device's limit cannot be read."""
    from jpwr.gpu.power_limit import PowerLimitError, default_or_none, open_device, read
    sweep = opts.power_limit is not None
    scope = opts.power_limit_scope if sweep else "gpu"
    try:
        device = open_device(dist.local_rank, scope=scope, devices_per_package=opts.devices_per_package)
    except PowerLimitError as err:
        if sweep:
            raise BenchmarkInputError(str(err)) from None
        return  # no GPU power library here: nothing to record
    limit = default = None
    try:
        limit = read(device, "", device.limit_w)
        default = default_or_none(device)
    except PowerLimitError as err:
        if sweep:
            raise BenchmarkInputError(str(err)) from None
    finally:
        device.close()
    report.write_line(report.line(power_limit.START_SCOPE, {
        "rank": dist.rank, "device": device.device, "scope": device.scope,
        "limit_w": line_watts(limit), "default_w": line_watts(default)}))


def _note_refusal(opts: EnergyOptions, line: str) -> None:
    """The refusal in the run's folder (CARAML_RUNDIR, which the job
    inherits from JUBE), for the sweep's later points; nothing without one."""
    rundir = os.environ.get("CARAML_RUNDIR")
    if not rundir or not Path(rundir).is_dir():
        return
    marker = power_limit.refusal_marker(rundir)
    partial = marker.with_name(f".{marker.name}.{os.getpid()}")
    try:
        partial.write_text(report.one_line(f"point {opts.power_limit} was refused: {line}") + "\n")
        os.replace(partial, marker)
    except OSError as err:
        report.warning(f"could not note the refusal in {marker} ({err.strerror}): the sweep's "
                       "later points will each be refused alike")


def _check_external(limit: Limit, watts: float | None) -> None:
    """Mode external: the limit the centre set must be the point's."""
    from jpwr.gpu.power_limit import TOLERANCE_W, scope_name
    if watts is not None and abs(limit.reported_w - watts) > TOLERANCE_W:
        raise BenchmarkInputError(
            f"the power limit of {scope_name(limit)} is {limit.reported_w:g} W and this point asks "
            f"for {watts:g} W: in power_limit_mode external the centre sets it before the job (a "
            "Slurm prolog or SPANK option or an administrator) and it did not for this job; check "
            "that it is asked for (power_limit_sbatch) or run the point in mode suite")


@contextlib.contextmanager
def limited_power(opts: EnergyOptions, point: str, dist: Dist) -> Iterator[None]:
    """The sweep point's limit (opts.power_limit) on this rank's device for
    the block, each end said in a line; BenchmarkInputError (one line) where
    it cannot be set."""
    from jpwr.gpu.power_limit import PowerLimitError, PrivilegeMissing, limited
    tdp_w = power_limit.point_tdp_w(opts.tdp_w, opts.power_limit_scope, opts.devices_per_package)
    watts = power_limit.asked_w(point, tdp_w)
    external = opts.power_limit_mode == power_limit.EXTERNAL
    limit = None
    try:
        with limited(None if external else watts, local_index=dist.local_rank,
                     scope=opts.power_limit_scope, devices_per_package=opts.devices_per_package,
                     system_range=power_limit.parse_range(opts.power_limit_range_w)) as limit:
            if external:
                _check_external(limit, watts)
            if limit.owner:  # of a package's devices, the one that sets its limit says so
                report.write_line(report.line(power_limit.SET_SCOPE, {
                    "rank": dist.rank, "device": limit.device, "scope": limit.scope,
                    "mode": opts.power_limit_mode, "asked": opts.power_limit,
                    "asked_w": "-" if watts is None else watts,
                    "before_w": limit.before_w, "reported_w": limit.reported_w}))
            with restored_at_first_signal(limit, lambda when: _say_restored(dist, limit, when)):
                yield
    except PrivilegeMissing as err:
        line = f"{err}: {CENTRE}"
        _note_refusal(opts, line)
        raise BenchmarkInputError(line) from None
    except PowerLimitError as err:
        raise BenchmarkInputError(str(err)) from None
    finally:
        if limit is not None and limit.owner:
            _say_restored(dist, limit)


def _say_restored(dist: Dist, limit: Limit, when: str | None = None) -> None:
    ok = limit.restore_now() if when else limit.restored
    report.emit(power_limit.RESTORED_SCOPE, rank=dist.rank, device=limit.device,
                restored="yes" if ok else "no", limit_w=limit.before_w,
                **({"when": when} if when else {}))


@contextlib.contextmanager
def restored_at_first_signal(limit: Limit, said: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, the first stop signal (caraml/node/stopping.py's)
    puts the limit back at once: Python runs a signal's handler only when the
    main thread comes back to Python, after the step's GPU work, so a thread
    that the signal wakes through signal.set_wakeup_fd does it; said(name)
    reports it. Where nothing was set, or another part of the process holds
    the wakeup fd (an event loop), the block's end puts the limit back."""
    if limit.asked_w is None or not limit.owner:
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        previous = None
    if previous != -1:
        if previous is not None:
            signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        yield
        return
    stops = {int(s) for s in STOP_SIGNALS}

    def watch() -> None:
        while (got := os.read(read_fd, 64)):
            first = next((n for n in got if n in stops), None)
            if first is not None:
                said(signal.Signals(first).name)
                return
    thread = threading.Thread(target=watch, name="power-limit-restore", daemon=True)
    thread.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(-1)
        os.close(write_fd)  # the thread reads the end and stops, if it has not yet
        thread.join(timeout=30)
        os.close(read_fd)
