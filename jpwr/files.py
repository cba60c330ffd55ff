"""The files of one measured run in an output directory, all sharing one
suffix (e.g. "_rank3"):

  power<suffix>.csv         every sample (time, method, device, source,
                            power_w), appended while the run goes on
  energy<suffix>.<csv|h5>   one row per channel, written at the end
  additional_<method><suffix>.<csv|h5>   hardware counters next to the
                            integrated energy, for methods that have them
  meta<suffix>.json         host, rank, methods, channels, interval; written
                            at the start and completed at the end (its end
                            and sample count, in the room the first version
                            kept where no new file can be written), so a
                            killed run can still be interpreted"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from jpwr.energy import POWER_COLUMNS
from jpwr.notice import one_line

FILETYPES = ("csv", "h5")
_ENV_REFERENCE = re.compile(r"%q\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_suffix(suffix: str) -> str:
    """Replaces %q{VAR} by the variable's value, so that every rank of a job
    writes its own files. An unset variable is an error: writing all ranks
    to one name would silently lose data."""

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ValueError(f"suffix {suffix!r} uses %q{{{name}}}, but {name} is not set")
        return os.environ[name]

    return _ENV_REFERENCE.sub(value, suffix)


def check_filetype(filetype: str) -> None:
    if filetype not in FILETYPES:
        raise ValueError(f"file type must be one of {', '.join(FILETYPES)}, got {filetype!r}")
    if filetype == "h5":
        try:
            import tables  # noqa: F401
        except ImportError:
            raise ValueError("file type h5 needs the Python package 'tables' "
                             "(extra 'h5')") from None


class OutputUnwritable(ValueError):
    """The output directory cannot take the run's files (no permission, a
    full disk, a quota): the measured command can still run without them."""


class RunFiles:
    def __init__(self, out_dir: str | os.PathLike, suffix: str, filetype: str) -> None:
        self.dir = Path(out_dir)
        self.suffix = expand_suffix(suffix)
        self.filetype = filetype
        power = self.path("power", "csv")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            # open for the whole run, closed by close()
            self._power = open(power, "w", newline="")  # noqa: SIM115
        except OSError as err:
            raise OutputUnwritable(f"cannot write to {self.dir} ({one_line(err)})") from None
        self._rows = csv.writer(self._power)
        try:
            # a full disk takes the empty file and refuses its first line
            self._rows.writerow(POWER_COLUMNS)
            self._power.flush()
        except OSError as err:
            with contextlib.suppress(OSError):  # its flush fails the same way
                self._power.close()
            power.unlink(missing_ok=True)
            raise OutputUnwritable(f"cannot write {power} ({one_line(err)})") from None

    def path(self, stem: str, ext: str | None = None) -> Path:
        return self.dir / f"{stem}{self.suffix}.{ext or self.filetype}"

    def append_power(self, channels: Sequence[tuple[str, str, str]],
                     times: Sequence[float], rows: Sequence[Sequence[float]]) -> None:
        self._rows.writerows(
            (f"{t:.6f}", *channel, f"{watts:.4f}")
            for t, values in zip(times, rows) for channel, watts in zip(channels, values))
        # Flushed to the kernel, not synced to disk: a killed process loses
        # nothing that reached the page cache, and fsync would stall the sampler.
        self._power.flush()

    def close_power(self) -> None:
        self._power.close()

    def write_table(self, table: pd.DataFrame, stem: str, filetype: str | None = None) -> None:
        path = self.path(stem, filetype)
        if path.suffix == ".h5":
            _whole(path, lambda partial: table.to_hdf(partial, key=stem, mode="w"))
        else:
            _whole(path, lambda partial: table.to_csv(partial, index=False))

    def write_meta(self, meta: dict) -> None:
        """The meta file, padded with blanks (JSON allows them) to keep room
        for its final version: where a full disk or a folder that became
        unwritable refuses a new file at the end, the run's end and sample
        count still go into the room the file holds."""
        path = self.path("meta", "json")
        text = json.dumps(meta, indent=1) + "\n"
        try:
            _whole(path, lambda partial: partial.write_text(text.ljust(max(META_ROOM, 2 * len(text)))))
        except OSError:
            if not _in_place(path, text):
                raise


# bytes a meta file holds at least: room for its final version
META_ROOM = 4096


def _in_place(path: Path, text: str) -> bool:
    """Overwrites `path` within the bytes it already holds (no new block is
    needed); False where it is not there, too small or not writable."""
    data = text.encode()
    try:
        size = path.stat().st_size
        if len(data) > size:
            return False
        with open(path, "r+b") as f:
            f.write(data.ljust(size))
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        return False
    return True


def _whole(path: Path, write: Callable[[Path], object]) -> None:
    """Writes a file whole or not at all: `write` fills a temporary name,
    which is synced and renamed over `path`, so that a full disk or a kill
    in the middle leaves the previous complete version (or none), never half
    a file that a later combine would trust. The temporary file goes on
    failure."""
    partial = path.with_name(path.name + ".partial")
    try:
        write(partial)
        with open(partial, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
