"""The jpwr command.

  jpwr --methods M [M ...] [--interval MS] [--df-out DIR] [--df-filetype csv|h5]
       [--df-suffix S] [--flush-s S] CMD [ARGS ...]
      runs CMD, measures while it runs, writes the DataFrames to DIR, prints a
      short summary to stderr and exits with CMD's exit status.
  jpwr combine [--out FILE.csv] PATH [PATH ...]
      folds the files of all ranks and nodes of a job into one table and one
      `jpwr-summary:` line.

Bad input gives one line `jpwr: error: ...` and exit status 2 (127 for a
command that does not exist) before anything is started."""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys

from jpwr import aggregate
from jpwr.ctxmgr import get_power
from jpwr.files import OutputUnwritable
from jpwr.method import MethodUnavailable
from jpwr.methods import NAMES, check_names, from_names
from jpwr.notice import one_line, say
from jpwr.version import VersionAction

RUN_USAGE = ("jpwr --methods M [M ...] [--interval MS] [--df-out DIR] [--df-filetype csv|h5] "
             "[--df-suffix S] [--flush-s S] CMD [ARGS ...]")
COMBINE_USAGE = "jpwr combine [--out FILE.csv] PATH [PATH ...]"
USAGE_ERROR = 2
NOT_FOUND = 127
# Slurm and users stop jobs with these; the measured command must get them,
# and jpwr must live on to write its files once the command has ended.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_VALUED_OPTIONS = {"--interval", "--df-out", "--df-filetype", "--df-suffix", "--flush-s"}


class UsageError(ValueError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message)


def _run_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="jpwr", usage=RUN_USAGE,
                     description="Measure power and energy while CMD runs "
                                 f"(or: {COMBINE_USAGE}).")
    parser.add_argument("--methods", nargs="+", required=True, metavar="M",
                        help=f"one or more of {', '.join(NAMES)} (also comma-separated)")
    parser.add_argument("--interval", type=float, default=100.0, metavar="MS",
                        help="sampling interval in ms (default 100)")
    parser.add_argument("--df-out", metavar="DIR", help="write the DataFrames to DIR")
    parser.add_argument("--df-filetype", choices=("csv", "h5"), default="csv")
    parser.add_argument("--df-suffix", default="", metavar="S",
                        help="file name suffix; %%q{VAR} becomes $VAR, e.g. _%%q{SLURM_PROCID}")
    parser.add_argument("--flush-s", type=float, default=2.0, metavar="S",
                        help="append samples to DIR/power<suffix>.csv every S seconds (default 2)")
    # upstream jpwr's MPI options, refused with the way this jpwr does it
    parser.add_argument("--use-mpi", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mpi-ranks", nargs="+", metavar="RANK", help=argparse.SUPPRESS)
    parser.add_argument("--version", action=VersionAction)
    return parser


# Why upstream's --use-mpi and --mpi-ranks are refused, and what to do instead
NO_MPI = ("--use-mpi and --mpi-ranks are upstream jpwr's; this jpwr needs no MPI: start it on "
          "every rank (srun, mpirun) and each writes its own files, with host and pid in their "
          "names and the rank from RANK or SLURM_PROCID; name the rank with --df-suffix, e.g. "
          "_rank%q{SLURM_PROCID} (%q{OMPI_COMM_WORLD_RANK} under Open MPI's mpirun), and measure "
          "some ranks only by starting jpwr on those ranks alone")


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """(jpwr's options, CMD and its arguments). argparse cannot tell where
    the names after --methods end and CMD begins; a name is a known method
    (or a comma list of them), except that the first word after --methods is
    always taken, so that a misspelt method is reported, not run."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return argv[:i], argv[i + 1:]
        if word in _VALUED_OPTIONS:
            i += 2
        elif word == "--methods":
            i += 1
            if i < len(argv) and not argv[i].startswith("-"):
                i += 1
            while i < len(argv) and all(n in NAMES for n in argv[i].split(",")):
                i += 1
        elif word == "--mpi-ranks":  # upstream's, refused with its reason (_prepare)
            i += 1
            while i < len(argv) and argv[i].isdigit():
                i += 1
        elif word.startswith("-"):
            i += 1
        else:
            return argv[:i], argv[i:]
    return argv, []


class SignalForwarder:
    """Passes FORWARDED signals on to the child, also ones that arrive
    before the child exists."""

    def __init__(self) -> None:
        self.child: subprocess.Popen | None = None
        self._pending: list[int] = []
        self._previous = {sig: signal.signal(sig, self._handle) for sig in FORWARDED}

    def _handle(self, signum: int, _frame) -> None:
        if signum == signal.SIGINT and _terminal_sent_it():
            return
        if self.child is None:
            self._pending.append(signum)
        else:
            self.child.send_signal(signum)  # a no-op once the child has been reaped

    def attach(self, child: subprocess.Popen) -> None:
        self.child = child
        for signum in self._pending:
            child.send_signal(signum)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _terminal_sent_it() -> bool:
    """Ctrl-C in a terminal reaches the whole foreground process group, the
    child included; forwarding it again would interrupt the child twice."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """preexec_fn for CMD: the kernel kills CMD when jpwr dies, also of a
    SIGKILL that gives jpwr no chance to pass anything on. Linux only."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    parent = os.getpid()

    def arm() -> None:
        # Runs in the child between fork and exec: only the already-loaded
        # libc is called, no import, no lock.
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # jpwr died before the line above
            os._exit(NOT_FOUND)

    return arm


def _exit_status(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode


class CommandNotFound(UsageError):
    pass


def _prepare(argv: list[str]):
    """Everything that can refuse the run, before the command starts:
    (command, methods, scope)."""
    options, command = split_command(argv)
    args = _run_parser().parse_args(options)
    if args.use_mpi or args.mpi_ranks:
        raise UsageError(NO_MPI)
    names = check_names(n for value in args.methods for n in value.split(",") if n)
    if not args.interval > 0:
        raise UsageError(f"--interval must be a positive number of ms, got {args.interval:g}")
    if not command:
        raise UsageError(f"no command given; usage: {RUN_USAGE}")
    if shutil.which(command[0]) is None:
        raise CommandNotFound(f"command not found: {command[0]}")
    methods = from_names(names)
    # host and pid end every file's name, as upstream's do: two runs into
    # one --df-out never overwrite each other (jpwr combine counts the
    # latest run of each rank and names the others)
    suffix = f"{args.df_suffix}.{socket.gethostname()}.{os.getpid()}"
    measure = functools.partial(get_power, methods, args.interval, suffix=suffix,
                                filetype=args.df_filetype, flush_s=args.flush_s)
    try:
        try:
            scope = measure(out_dir=args.df_out)
        except OutputUnwritable as err:
            # the command is what the user came for; its energy is lost, and said so
            say(f"warning: {err}; {command[0]} runs, its energy is measured without files "
                f"(the summary below is all there is)")
            scope = measure(out_dir=None)
    except ValueError:
        for method in methods:
            method.close()
        raise
    return command, methods, scope


def run(argv: list[str]) -> int:
    try:
        command, methods, scope = _prepare(argv)
    except (ValueError, MethodUnavailable) as err:
        say(f"error: {err}")
        return NOT_FOUND if isinstance(err, CommandNotFound) else USAGE_ERROR
    forwarder = SignalForwarder()
    try:
        scope.start()
        child = subprocess.Popen(command, preexec_fn=_die_with_parent())
    except (OSError, subprocess.SubprocessError) as err:
        forwarder.restore()
        scope.stop()
        say(f"error: cannot start {command[0]} ({err})")
        return NOT_FOUND
    forwarder.attach(child)
    returncode = child.wait()
    # From here on nothing may turn CMD's status into jpwr's: scope.stop()
    # reports a failing disk instead of raising, and so does the summary.
    scope.stop()
    forwarder.restore()
    for method in methods:
        method.close()
    try:
        _print_summary(scope)
    except Exception as err:  # noqa: BLE001
        say(f"error: no summary ({one_line(err)}); the samples are in the files written so far")
    return _exit_status(returncode)


def _print_summary(scope) -> None:
    table, _ = scope.channel_energy()
    table["origin"], table["file"] = aggregate.FROM_ENERGY, ""
    print(aggregate.format_table(table), file=sys.stderr)
    try:
        summary = aggregate.summarize(table)
    except aggregate.NoEnergyData as err:
        say(f"warning: {err}")
        return
    for line in aggregate.notes(table):
        say(f"note: {line}")
    where = f"; files in {scope.files.dir}" if scope.files else ""
    say(f"total {summary['total_wh']:.6g} Wh over {summary['duration_s']:.3g} s, "
        f"{summary['devices']} device(s) counted ({summary['methods']}, "
        f"{summary['source'].upper()}){where}")


def combine(argv: list[str]) -> int:
    parser = _Parser(prog="jpwr combine", usage=COMBINE_USAGE,
                     description="Combine the energy files of all ranks and nodes of a job.")
    parser.add_argument("--out", metavar="FILE.csv", help="also write the combined table here")
    parser.add_argument("paths", nargs="+", metavar="PATH")
    try:
        args = parser.parse_args(argv)
        job = aggregate.read_job(args.paths)
        table = aggregate.combine_job(job)
        summary = aggregate.summarize(table)
    except ValueError as err:
        say(f"error: {err}")
        return 1
    print(aggregate.format_table(table))
    for line in aggregate.notes(table):
        say(f"note: {line}")
    if args.out:
        table.to_csv(args.out, index=False)
    print(aggregate.summary_line(summary))
    lines = (aggregate.host_lines(table) + aggregate.scope_lines(table)
             + aggregate.window_lines(aggregate.job_windows(job)))
    for line in lines:
        print(line)
    sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["combine"]:
        return combine(argv[1:])
    return run(argv)
