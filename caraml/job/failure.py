"""The cause of a failed job, in one line for its row of the result table.

job.sh's exit handler runs this on the job's logs (stderr first, then
stdout) and writes the line to the work package's error file:

    job exited with status 1: out of memory at 256 samples per device (CUDA): lower the global batch size
    job exited with status 143 (SIGTERM): ...

The first exception of the logs is the cause; what launchers add around it
(torchrun's `[rank0]:` prefixes, its ChildFailedError summary, the re-raise
on every other rank) is not. Standard library only: it runs with the node's
python3 where the suite's environment may be missing."""

from __future__ import annotations

import argparse
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    # Run by the job script as a file: the suite's packages live two folders up.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from caraml.job import oom_evidence
from caraml.job.log import last_attempt
from caraml.job.oom_evidence import Verdict
from caraml.report import ERROR_PREFIX, error, one_line

# torchrun's --tee / log-line prefix, "[rank3]:" and "[default0]:"
LAUNCHER_PREFIX = re.compile(r"^\[(?:rank|default)?(\d+)\]:\s?")
EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt))(?::\s*(?P<message>.*))?$")
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
# torchrun got a signal and stopped its workers with it
LAUNCHER_SIGNAL = re.compile(r"SignalException: Process \d+ got signal: (\d+)")
# exceptions that only say another one happened first
ECHOES = ("torch.distributed.elastic", "ChildFailedError", "KeyboardInterrupt")
# a device's allocator, or the CPU's (torch's "DefaultCPUAllocator: can't allocate memory")
OUT_OF_MEMORY = re.compile(r"\b(CUDA|HIP|XPU|MPS)? ?out of memory|Default(CPU)Allocator: can't allocate",
                           re.IGNORECASE)
NO_MODULE = re.compile(r"No module named '([^']+)'")
# bash: "job.sh: line 40: /x/.venv/bin/python: No such file or directory"
MISSING_VENV = re.compile(r"(\S*\.venv/bin/python\S*): (?:No such file or directory|not found)")
COLLECTIVE = re.compile(r"\b(NCCL|RCCL|gloo|Gloo|c10d)\b")
# torchrun's failure summary, whose "Root Cause" section names the first rank that failed:
#   rank      : 1 (local_rank: 1)
#   exitcode  : -9 (pid: 12291)  (SIGKILL)
SUMMARY_ROOT = "Root Cause (first observed failure):"
SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
SUMMARY_HOST = re.compile(r"^\s*host\s*:\s*(\S+)")
SUMMARY_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)[^(]*\(pid: (\d+)\)\s*(?:\((SIG\w+)\))?")
# gloo's "[/path/pair.cc:537] Read error ...": the source position says nothing to a user
SOURCE_POSITION = re.compile(r"^\[[^\]]+\.(?:cc|cpp|h):\d+\]\s*")


def _strip(line: str) -> tuple[str | None, str]:
    """The rank a launcher prefix names (or None) and the line without it."""
    match = LAUNCHER_PREFIX.match(line)
    if match:
        return match.group(1), line[match.end():].rstrip("\n")
    return None, line.rstrip("\n")


def _short(path: str) -> str:
    """The last package directories of a source path: site-packages prefixes
    differ between hosts and only make the row long."""
    parts = Path(path).parts
    return "/".join(parts[-3:])


def _root_cause(lines: list[tuple[str | None, str]]) -> tuple[str, str, str, str | None] | None:
    """(rank, how it ended, its pid, its host where named) from torchrun's
    summary: the first rank that failed."""
    texts = [t for _, t in lines]
    if SUMMARY_ROOT not in texts:
        return None
    rank = host = None
    for text in texts[texts.index(SUMMARY_ROOT):]:
        if named := SUMMARY_HOST.match(text):
            host = named.group(1)
        if numbered := SUMMARY_RANK.match(text):
            rank = numbered.group(1)
        ended = SUMMARY_EXIT.match(text)
        if ended and rank is not None:
            code, pid, sig = ended.groups()
            # the node, for a job of several
            on = f" on {host}" if host else ""
            return rank, (f"killed by {sig}" if sig else f"exit code {code}") + on, pid, host
    return None


def _exception_cause(lines: list[tuple[str | None, str]], samples_per_device: str,
                     root: tuple[str, str] | None) -> str | None:
    last_frame: dict[str, str] | None = None
    for rank, text in lines:
        frame = FRAME.match(text)
        if frame:
            last_frame = frame.groupdict()
            continue
        launcher_signal = LAUNCHER_SIGNAL.search(text)
        if launcher_signal:
            name = signal.Signals(int(launcher_signal.group(1))).name
            if root is None or name in root[1]:
                return f"the launcher got {name} and stopped the ranks"
            # srun (--kill-on-bad-exit) stopped this node's launcher after a rank
            # failed first elsewhere; the nodes' lines reach the log in any order
            continue
        match = EXCEPTION.match(text)
        if not match or any(echo in text for echo in ECHOES):
            continue
        kind, message = match.group("type"), (match.group("message") or "").strip()
        rank = rank if rank is not None else (root[0] if root else None)
        where = f"rank {rank}: " if rank is not None else ""
        if found := OUT_OF_MEMORY.search(text):
            device = found.group(1) or found.group(2) or "device"
            return f"{where}out of memory{_at(samples_per_device)} ({device}): {LOWER_THE_BATCH}"
        module = NO_MODULE.search(message)
        if module:
            return (f"{where}missing Python module {module.group(1)}: install it into the "
                    "job's environment (bash aux/setup.sh) or its container")
        if collective := COLLECTIVE.search(text):
            first = SOURCE_POSITION.sub("", message).split(". ")[0]
            after = (f" (first failure: rank {root[0]} {root[1]})"
                     if root and root[0] != rank else "")
            return (f"{where}communication error ({collective.group(1)}): "
                    f"{kind}: {first}{after}")
        if not message and last_frame:
            return (f"{where}{kind} at {_short(last_frame['file'])}:{last_frame['line']} "
                    f"in {last_frame['func']}")
        return f"{where}{kind}: {message}" if message else f"{where}{kind}"
    return None


LOWER_THE_BATCH = "lower the global batch size (or the micro-batch size) or use more devices"


def _at(samples_per_device: str) -> str:
    return f" at {samples_per_device} samples per device" if samples_per_device else ""


def _this_host(host: str) -> bool:
    """Whether torchrun's host name is this node's: its short or full name,
    or localhost (a standalone torchrun names no other)."""
    short = host.split(".")[0]
    return short == "localhost" or short in {socket.gethostname().split(".")[0],
                                             socket.getfqdn().split(".")[0]}


def _killed(how: str, verdict: Verdict, samples_per_device: str, elsewhere: str | None = None) -> str:
    """A rank killed by SIGKILL, named for what killed it: the OOM killer
    only where the job's cgroup, the kernel or Slurm says so."""
    if verdict.oom:
        return (f"{how}: out of host memory{_at(samples_per_device)} (the OOM killer: "
                f"{verdict.said_by}): {LOWER_THE_BATCH}")
    if verdict.said_by:
        return f"{how} (not by the OOM killer: {verdict.said_by})"
    if elsewhere:
        return (f"{how} (whether by the OOM killer is not known here: this node cannot read "
                f"{elsewhere}'s cgroup or kernel log)")
    return (f"{how} (whether by the OOM killer is not known here: neither the job's cgroup nor "
            "the kernel's log can be read)")


# pids of the killed ranks -> what says whether the OOM killer killed them
OomJudge = Callable[[list[str]], Verdict]


def cause(text: str, samples_per_device: str = "", oom: OomJudge | None = None) -> str | None:
    """The named cause in a job's log text, or None when it names none;
    `oom` judges a rank killed by SIGKILL (without it only Slurm's word in
    the logs counts)."""
    lines = [_strip(line) for line in text.splitlines()]
    # the suite's own one-line errors name their cause already
    own = next((t for _, t in lines if t.startswith(ERROR_PREFIX)), None)
    if own:
        return own.removeprefix(ERROR_PREFIX)
    venv = next((MISSING_VENV.search(t) for _, t in lines if MISSING_VENV.search(t)), None)
    if venv:
        return (f"the suite's environment is missing ({venv.group(1)} not found): "
                "run bash aux/setup.sh")
    found_root = _root_cause(lines)
    root = found_root[:2] if found_root else None
    if found_root and "SIGKILL" in found_root[1]:
        rank, how, pid, host = found_root
        # this node's cgroup and kernel log say nothing of a rank on another
        # node: there, as without a judge, only Slurm's word in the logs counts
        elsewhere = host if host and not _this_host(host) else None
        verdict = oom([pid]) if oom and not elsewhere else oom_evidence.judge(text, [pid], None, None, None)
        root = (rank, _killed(how, verdict, samples_per_device, elsewhere))
    found = _exception_cause(lines, samples_per_device, root)
    if found:
        return found
    return f"rank {root[0]} {root[1]}" if root else None


def summary(status: int, logs: list[Path], samples_per_device: str = "", what: str = "job",
            oom: OomJudge | None = None) -> str:
    """The error file's line: the exit status, the signal it stands for, the cause."""
    return _summary(status, read_logs(logs), samples_per_device, what, oom)


def read_logs(logs: list[Path]) -> str:
    """The logs' texts, each from the job's last attempt on: a job Slurm
    requeued fails or not by its last attempt, not by the first one's end."""
    return "\n".join(last_attempt(p.read_text(errors="replace")) for p in logs if p.is_file())


def _summary(status: int, text: str, samples_per_device: str, what: str,
             oom: OomJudge | None = None) -> str:
    head = f"{what} exited with status {status}"
    if status > 128:
        try:
            head += f" ({signal.Signals(status - 128).name})"
        except ValueError:
            pass
    found = cause(text, samples_per_device, oom)
    line = f"{head}: {found}" if found else head
    return one_line(line)


def run(what: str, command: list[str]) -> int:
    """Runs a step's command with its stderr passed through; if it fails
    without a `CARAML ERROR:` line of its own, adds one that names the cause,
    for the row (a traceback alone would leave the row without an error)."""
    try:
        proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, errors="replace")
    except OSError as exc:
        text = f"{command[0]}: {exc.strerror}"
        error(_summary(127, text, '', what))
        return 127
    lines = []
    for line in proc.stderr or ():
        sys.stderr.write(line)
        lines.append(line)
    status = proc.wait()
    if status and not any(line.startswith(ERROR_PREFIX) for line in lines):
        error(_summary(status, ''.join(lines), '', what))
    return status


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--run"]:
        # failure.py --run WHAT -- COMMAND...
        return run(argv[1], argv[3:] if argv[2:3] == ["--"] else argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--status", type=int, required=True, help="the job's exit status")
    ap.add_argument("--samples-per-device", default="",
                    help="batch per device, named in an out-of-memory cause")
    ap.add_argument("--oom-kills-at-start", default="",
                    help="the job cgroup's oom_kill count at the job's start (caraml/job/oom_evidence.py)")
    ap.add_argument("logs", nargs="*", type=Path, help="the job's log files, stderr first")
    args = ap.parse_args(argv)
    text = read_logs(args.logs)
    at_start = int(args.oom_kills_at_start) if args.oom_kills_at_start.isdigit() else None

    def oom(pids: list[str]) -> Verdict:
        return oom_evidence.judge(text, pids, at_start, oom_evidence.cgroup_oom_kills(),
                                  oom_evidence.kernel_log())
    print(summary(args.status, args.logs, args.samples_per_device, oom=oom))
    return 0


if __name__ == "__main__":
    sys.exit(main())
