"""The jpwr command.

  jpwr --methods M [M ...] [--interval MS] [--df-out DIR] [--df-filetype csv|h5]
       [--df-suffix S] [--flush-s S] [--use-mpi [--mpi-ranks R [R ...]]] CMD [ARGS ...]
      runs CMD, measures while it runs, writes the DataFrames to DIR, prints a
      short summary to stderr and exits with CMD's exit status; upstream's
      --use-mpi names the files by the process's MPI rank, --mpi-ranks
      measures on those ranks only (the others run CMD unmeasured).
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
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

from jpwr import aggregate, mpi
from jpwr.ctxmgr import PowerScope, get_power
from jpwr.files import OutputUnwritable
from jpwr.method import Method, MethodUnavailable
from jpwr.methods import NAMES, check_names, from_names
from jpwr.notice import LOG, add_level_options, chosen_level, detail, level_kept, one_line, say
from jpwr.version import VersionAction

RUN_USAGE = ("jpwr [-q|-v] --methods M [M ...] [--interval MS] [--df-out DIR] [--df-filetype csv|h5] "
             "[--df-suffix S] [--flush-s S] [--use-mpi [--mpi-ranks R [R ...]]] CMD [ARGS ...]")
COMBINE_USAGE = "jpwr combine [-q|-v] [--out FILE.csv] PATH [PATH ...]"
USAGE_ERROR = 2
NOT_FOUND = 127
# Slurm and users stop jobs with these; the measured command must get them,
# and jpwr must live on to write its files once the command has ended.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_VALUED_OPTIONS = {"--interval", "--df-out", "--df-filetype", "--df-suffix", "--flush-s"}


class UsageError(ValueError):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
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
    # upstream jpwr's MPI options, as its README has them
    parser.add_argument("--use-mpi", action="store_true",
                        help="name the files by this process's MPI rank (power.<rank>.csv, ...) "
                             "where no --df-suffix names them; the launcher's variable gives the "
                             "rank, else mpi4py")
    parser.add_argument("--mpi-ranks", nargs="+", type=int, metavar="RANK",
                        help="with --use-mpi: measure on these MPI ranks only; the others run CMD "
                             "unmeasured")
    parser.add_argument("--version", action=VersionAction)
    add_level_options(parser)
    return parser


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
        elif word == "--mpi-ranks":  # upstream's: the ranks that measure
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

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
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


def _die_with_parent() -> Callable[[], None] | None:
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


def _mpi_rank(args: argparse.Namespace) -> int | None:
    """The process's MPI rank where --use-mpi asks for it (UsageError where
    nothing names it), else None."""
    if args.mpi_ranks and not args.use_mpi:
        raise UsageError("--mpi-ranks needs --use-mpi, as in upstream jpwr")
    if not args.use_mpi:
        return None
    try:
        return mpi.rank()[0]
    except mpi.NoRank as err:
        raise UsageError(str(err)) from None


def _suffix(args: argparse.Namespace, rank: int | None) -> str:
    """The files' names after their stem: --use-mpi without --df-suffix
    names them by the rank alone, as upstream does (power.<rank>.csv: a
    rank's run into the same folder replaces its files); otherwise host and
    pid end every name, as upstream's do, so that two runs into one
    --df-out never overwrite each other (jpwr combine counts the latest run
    of each rank and names the others)."""
    if rank is not None and not args.df_suffix:
        return f".{rank}"
    return f"{args.df_suffix}.{socket.gethostname()}.{os.getpid()}"


def _prepare(argv: list[str]) -> tuple[list[str], list[Method], PowerScope | None]:
    """Everything that can refuse the run, before the command starts:
    (command, methods, scope); no methods and no scope on a rank that
    --mpi-ranks leaves out."""
    options, command = split_command(argv)
    args = _run_parser().parse_args(options)
    LOG.setLevel(chosen_level(args.quiet, args.verbose))
    rank = _mpi_rank(args)
    names = check_names(n for value in args.methods for n in value.split(",") if n)
    if not args.interval > 0:
        raise UsageError(f"--interval must be a positive number of ms, got {args.interval:g}")
    if not command:
        raise UsageError(f"no command given; usage: {RUN_USAGE}")
    if shutil.which(command[0]) is None:
        raise CommandNotFound(f"command not found: {command[0]}")
    if args.mpi_ranks and rank not in args.mpi_ranks:
        return command, [], None
    methods = from_names(names)
    for method in methods:
        detail(f"{method.name}: {', '.join(c.device for c in method.channels)} "
               f"({', '.join(sorted({c.source for c in method.channels}))})")
    detail(f"a sample every {args.interval:g} ms, flushed every {args.flush_s:g} s"
           + (f" into {args.df_out}" if args.df_out else ", no files (no --df-out)"))
    measure = functools.partial(get_power, methods, args.interval, suffix=_suffix(args, rank),
                                filetype=args.df_filetype, flush_s=args.flush_s, rank=rank)
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
        if scope is not None:
            scope.start()
        child = subprocess.Popen(command, preexec_fn=_die_with_parent())
    except (OSError, subprocess.SubprocessError) as err:
        forwarder.restore()
        if scope is not None:
            scope.stop()
        say(f"error: cannot start {command[0]} ({err})")
        return NOT_FOUND
    forwarder.attach(child)
    returncode = child.wait()
    if scope is None:  # a rank --mpi-ranks leaves out: CMD ran unmeasured
        forwarder.restore()
        return _exit_status(returncode)
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


def _print_summary(scope: PowerScope) -> None:
    table, _ = scope.channel_energy()
    table["origin"], table["file"] = aggregate.FROM_ENERGY, ""
    if LOG.isEnabledFor(logging.INFO):
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
    add_level_options(parser)
    try:
        args = parser.parse_args(argv)
        LOG.setLevel(chosen_level(args.quiet, args.verbose))
        job = aggregate.read_job(args.paths)
        table = aggregate.combine_job(job)
        lines = aggregate.result_lines(table, job)
    except ValueError as err:
        say(f"error: {err}")
        return 1
    print(aggregate.format_table(table))
    for path, rows in table.groupby("file", sort=True):
        detail(f"read {path}: {len(rows)} channel(s), {rows['origin'].iloc[0]}")
    for line in aggregate.notes(table):
        say(f"note: {line}")
    if args.out:
        table.to_csv(args.out, index=False)
    for line in lines:
        print(line)
    sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with level_kept(LOG):
        if argv[:1] == ["combine"]:
            return combine(argv[1:])
        return run(argv)
