"""The job script's own lines in a job's output (aux/job.sh.in): its start
line, once per attempt of a job Slurm requeued (a node that failed,
`scontrol requeue`), with the requeues before it, and the line an attempt
that Slurm runs again ends with, which keeps its cause. Slurm appends a
requeued job's output to what the attempt it stopped wrote, so a job's
failure cause (caraml/job/failure.py) and its row (caraml/row/evidence.py)
are read from the last attempt on, and the earlier attempts' causes from
these lines.

A log is read as a stream, with memory bounded whatever its size
(read_log): an attempt is kept whole up to WHOLE_BYTES; beyond that, its
first and last EDGE_BYTES and, between them, the lines the suite's readers
look for (its own `CARAML` lines, exceptions, torchrun's and Slurm's
summaries), KEPT_BYTES of those at most, and a line that says how much was
left out. Standard library only (job script and login node)."""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path

START = re.compile(r"^CARAML job: start=(\S+).*$", re.MULTILINE)
_REQUEUED = re.compile(r"^CARAML job: start=.* requeued=(\d+)\s*$", re.MULTILINE)
# an attempt that Slurm runs again: its cause, as caraml/job/failure.py names it
AGAIN = "CARAML job requeued:"
_AGAIN = re.compile(rf"^{AGAIN} (.*)$", re.MULTILINE)


def requeued(job_out: str) -> int | None:
    """How often Slurm requeued the job before its last attempt (None where
    the job has not started, or its script said nothing of it)."""
    found = _REQUEUED.findall(job_out)
    return int(found[-1]) if found else None


def requeue_causes(job_out: str) -> list[str]:
    """The causes in a job's output of the attempts Slurm ran again, in
    order (in one attempt's output: the cause it ended with, where Slurm
    runs the job again; read_log gives a whole job's)."""
    return [cause.strip() for cause in _AGAIN.findall(job_out)]


WHOLE_BYTES = 8 * 2**20
EDGE_BYTES = 2 * 2**20
KEPT_BYTES = 4 * 2**20
# a longer line (a progress bar's \r-joined updates) is cut there
LINE_BYTES = 64 * 2**10
BLOCK_BYTES = 2**20
# the job script's lines that split a log into attempts and keep their causes
_MARKS = re.compile(rb"^(?:CARAML job: start=|" + re.escape(AGAIN.encode()) + rb" )[^\n]*\n", re.MULTILINE)
# what the readers look for between the edges of a long log (caraml/job/failure.py,
# caraml/row/): the suite's lines, exceptions, Slurm's and torchrun's summaries
# (two patterns: one with both is several times slower)
_LOOKED_FOR = (re.compile(rb"CARAML|Error|Exception|Traceback|\*\*\*|Root Cause|exitcode"),
               re.compile(rb"^[ \t]*(?:rank|host)[ \t]*:", re.MULTILINE))


class _Attempt:
    """One attempt's text, fed in blocks of whole lines: all of it up to
    WHOLE_BYTES, else its edges and the looked-for lines between them."""

    def __init__(self) -> None:
        self.whole: list[bytes] = []
        self.size = 0
        self.head: bytes | None = None
        self.kept_first: list[bytes] = []
        self.kept_first_size = 0
        self.kept_last: deque[bytes] = deque()
        self.kept_last_size = 0
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.left_out = 0

    def add(self, lines: bytes) -> None:
        self.size += len(lines)
        if self.head is None:
            self.whole.append(lines)
            if self.size > WHOLE_BYTES:
                text, self.whole = b"".join(self.whole), []
                cut = text.rfind(b"\n", 0, EDGE_BYTES) + 1 or text.find(b"\n") + 1
                self.head = text[:cut]
                self._to_tail(text[cut:])
            return
        self._to_tail(lines)

    def _to_tail(self, lines: bytes) -> None:
        self.tail.append(lines)
        self.tail_size += len(lines)
        while len(self.tail) > 1 and self.tail_size - len(self.tail[0]) >= EDGE_BYTES:
            older = self.tail.popleft()
            self.tail_size -= len(older)
            self._middle(older)

    def _middle(self, lines: bytes) -> None:
        """Lines between the edges: kept where a reader looks for them,
        the first and the last KEPT_BYTES / 2 of those."""
        self.left_out += len(lines)
        starts = sorted({lines.rfind(b"\n", 0, found.start()) + 1
                         for pattern in _LOOKED_FOR for found in pattern.finditer(lines)})
        for begin in starts:
            self._keep(lines[begin:lines.find(b"\n", begin) + 1 or len(lines)])

    def _keep(self, line: bytes) -> None:
        self.left_out -= len(line)
        if self.kept_first_size + len(line) <= KEPT_BYTES // 2:
            self.kept_first.append(line)
            self.kept_first_size += len(line)
            return
        self.kept_last.append(line)
        self.kept_last_size += len(line)
        while self.kept_last_size > KEPT_BYTES // 2:
            dropped = self.kept_last.popleft()
            self.kept_last_size -= len(dropped)
            self.left_out += len(dropped)

    def text(self) -> str:
        if self.head is None:
            return b"".join(self.whole).decode(errors="replace")
        gap = [f"[... {self.left_out} bytes of this log left out here; the lines the suite reads "
               "are kept ...]\n".encode()] if self.left_out else []
        return b"".join([self.head, *self.kept_first, *gap, *self.kept_last, *self.tail]).decode(
            errors="replace")


@dataclass(frozen=True)
class Log:
    """A log as read_log gives it: its last attempt's text (abridged where
    it is long: left_out says how many bytes are not in it) and the causes
    of this job's attempts that Slurm ran again."""

    text: str = ""
    requeues: tuple[str, ...] = ()
    left_out: int = 0


class _Reader:
    def __init__(self) -> None:
        self.attempt, self.starts = _Attempt(), 0
        self.causes: list[str] = []

    def lines(self, block: bytes) -> None:
        """Whole lines, split at the job script's start lines."""
        done = 0
        for mark in _MARKS.finditer(block) if b"CARAML job" in block else ():
            line = mark.group(0)
            if line.startswith(b"CARAML job: start="):
                self.attempt.add(block[done:mark.start()])
                done = mark.start()
                if self.starts:
                    self.attempt = _Attempt()
                self.starts += 1
                if line.rstrip().endswith(b" requeued=0"):
                    self.causes = []  # this job's first attempt: an earlier run's causes are no part of it
            else:
                self.causes.append(line.split(b" ", 3)[3].decode(errors="replace").strip())
        self.attempt.add(block[done:])


def read_log(path: Path) -> Log:
    """A job's log (or any step's), read as a stream: its last attempt
    (from its last start line on, where it has several: one attempt's
    output is kept whole, what precedes its start line too), with memory
    bounded whatever its size; empty where it cannot be read."""
    reader, carry, skipping = _Reader(), b"", False
    try:
        with open(path, "rb") as log:
            while block := log.read(BLOCK_BYTES):
                if skipping:  # the rest of a line cut at LINE_BYTES
                    end = block.find(b"\n") + 1
                    reader.attempt.left_out += end or len(block)
                    if not end:
                        continue
                    block, skipping = block[end:], False
                data = carry + block
                cut = data.rfind(b"\n") + 1
                reader.lines(data[:cut])
                carry = data[cut:]
                if len(carry) > LINE_BYTES:
                    reader.lines(carry[:LINE_BYTES] + b"\n")
                    reader.attempt.left_out += len(carry) - LINE_BYTES
                    carry, skipping = b"", True
    except OSError:
        return Log()
    if carry:
        reader.lines(carry)
    return Log(reader.attempt.text(), tuple(reader.causes), reader.attempt.left_out)
