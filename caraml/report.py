r"""The JUBE adapter: the lines the suite prints for JUBE's patterns (see
platform.xml and the benchmark scripts) and for a person reading job.out,
and the only code that knows the rules their values must keep. Both sides
share it: the node side (caraml/node/) writes the lines, the row model
(caraml/row/) reads them back with kv_lines and last_kv, and the names of
the fields both read are declared here once (PROVENANCE_KEYS, MEMORY).

- a line is `CARAML <scope>: key=value ...`, written in one write (the
  ranks of a node share the job's output file);
- a value holds no whitespace (the patterns take `\S+`) and no comma (JUBE
  splits a parameter's value at commas, and its csv tables do not quote);
- an error is one line on stderr: `CARAML ERROR: <what is wrong and what
  to do>`;
- a float that is not a number prints as `nan`, which no float pattern
  matches, so the cell stays empty (JUBE 2.5.1 cannot hold a nan in a
  float column: the benchmark scripts type such columns as strings).

One format for every benchmark:

    CARAML global: images_per_s_mean=812.3 images_per_s_median=815.0
    CARAML rank 0: images_per_s_mean=203.1
    CARAML stop: iteration count 100 reached
    CARAML ERROR: global batch size 100 does not divide by 3 devices
"""

from __future__ import annotations

import re
import sys
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO


class BenchmarkInputError(ValueError):
    """Bad input that must stop a run before training starts, with one line
    that names the problem."""


def word(value: object) -> str:
    """Free text (a device name, a version) as one value: runs of
    whitespace and commas become one underscore; None becomes '-'."""
    return "-" if value is None else re.sub(r"[\s,]+", "_", str(value))


def path_value(path: str | Path) -> str:
    """A path as one value, percent-encoded (a space or a comma survives
    the round trip: urllib.parse.unquote gives the path back)."""
    return urllib.parse.quote(str(path))


# what a comma becomes in a value JUBE takes
COMMA = ";"


def one_line(message: str) -> str:
    """A message as one line without commas (they become semicolons)."""
    return " ".join(message.split()).replace(",", COMMA)


def parameter(value: str) -> None:
    """A value for a JUBE shell-mode parameter on stdout: one line without
    commas, and no newline (JUBE would keep it in the value)."""
    sys.stdout.write(one_line(value))


def parameter_list(value: str) -> list[str]:
    """The entries of a comma list that parameter() carried through JUBE
    (device ids: indices, UUIDs, MIG ids, none of which holds a `;`)."""
    return [entry for entry in value.strip().split(COMMA) if entry]


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    if re.search(r"[\s,]", text):
        raise ValueError(f"report values must not contain spaces or commas: {text!r}")
    return text


def line(scope: str, metrics: Mapping[str, object]) -> str:
    body = " ".join(f"{k}={_fmt(v)}" for k, v in metrics.items())
    return f"CARAML {scope}: {body}"


def write_line(text: str, file: TextIO | None = None) -> None:
    """Writes `text` and its newline in one write. The ranks of a node share
    the job's output file; under PYTHONUNBUFFERED print() writes the text and
    the newline separately, and another rank's line can land in between,
    where JUBE's patterns no longer find it."""
    file = file or sys.stdout
    file.write(text + "\n")
    file.flush()


def emit(scope: str, **metrics: object) -> None:
    write_line(line(scope, metrics))


def stop(reason: str) -> None:
    """Why the run ended (iteration count, wall-clock budget, a signal), for
    the person reading job.out."""
    write_line(f"CARAML stop: {reason}")


ERROR_PREFIX = "CARAML ERROR: "


def warning(message: str) -> None:
    """Something the reader of job.out must know that does not stop the run."""
    write_line(f"CARAML warning: {one_line(message)}")


def error(message: str) -> None:
    """One line on stderr; the job's error file and the result table show it."""
    write_line(ERROR_PREFIX + one_line(message), sys.stderr)


# The stop line's reason where a measurement window closed (caraml/node/stopping.py):
# a planned end, which the row's status reads as such
WINDOW_REACHED = "measurement window reached"
# The driver core's peak-memory figures (memory_<name> in its summary line)
MEMORY = ("max_allocated_gib", "max_reserved_gib", "device_gib")
# Another process's share of the host's CPU time while the run trained
# (foreign_cpu_pct of the `host at end` line, caraml/node/provenance.py)
# from which a run counts as contended: a competitor this large moves
# throughput by more than the run-to-run spread of a quiet host. The row
# model flags such a row; the LLM driver and the row model both refuse a
# matmul rate measured under it as MFU's denominator.
CONTENTION_PCT = 10.0


def contended_peak_refusal(foreign_cpu_pct: float | None) -> str | None:
    """Why a matmul rate measured on a host that other processes kept this
    busy cannot be MFU's denominator, or None: a load that holds every
    matmul window down alike gives a rate no rule inside the measurement
    can tell from the device's."""
    if foreign_cpu_pct is None or foreign_cpu_pct < CONTENTION_PCT:
        return None
    return f"matmul-rate-measured-on-a-host-whose-CPU-other-processes-used-{foreign_cpu_pct:.0f}%"


# The provenance line's keys, in its order (caraml/node/provenance.py writes them)
PROVENANCE_KEYS = ("commit", "clean", "torch", "cuda", "rocm", "device_name", "devices", "load",
                   "cpus", "other_benchmarks", "driver", "container", "hipblaslt_allow_tf32")


def kv(text: str) -> dict[str, str]:
    """key=value words of one line."""
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def kv_lines(text: str, prefix: str) -> list[dict[str, str]]:
    """Every line `<prefix> key=value ...` of a text, parsed."""
    start = re.compile(rf"^{re.escape(prefix)} (.*)$", re.MULTILINE)
    return [kv(found) for found in start.findall(text)]


def last_kv(text: str, scope: str) -> dict[str, str]:
    """The last `CARAML <scope>:` line of a text ({} where there is none):
    a job that was re-run appends its lines to the ones before."""
    found = kv_lines(text, f"CARAML {scope}:")
    return found[-1] if found else {}
