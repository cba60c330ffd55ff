"""Locks that processes of this host take in turn (flock), in the user's
runtime folder: the jobs of ReFrame's local partitions (which must never
measure each other) and JUBE's parse of a script folder.

JUBE 2.5.1 writes the parse log of a `jube run` beside its script
(FOLDER/jube-parse.log) and then moves it into the new run: of two runs of
scripts of one folder started at once, the later move can fail with
"No such file or directory: 'FOLDER/jube-parse.log'" (4 of 30 runs on
dev-cpu, 15 pairs of dry runs). The suite's own `jube run`s hold the
folder's lock while JUBE runs."""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def lock_file(name: str) -> Path:
    folder = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(folder) / f"caraml-{name}-{os.getuid()}.lock"


def jube_folder_lock(script: str | Path) -> Path:
    """The lock of the folder that holds a JUBE script."""
    folder = str(Path(script).resolve().parent)
    return lock_file("jube-" + hashlib.sha256(folder.encode()).hexdigest()[:16])


@contextmanager
def held(lock: Path) -> Iterator[None]:
    """Waits for the lock and holds it for the block (released when the
    process ends, whatever ends it)."""
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
