"""Files written whole or not at all, for the data the benchmarks cache
(the LLM's local corpus, the operator benchmark's generated fields)."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def write_whole(path: Path, data: bytes) -> None:
    """Writes data to a temporary file of this process, syncs it and renames
    it over `path`: a full disk or a kill in the middle leaves the previous
    complete file (or none), never half of one. The name is this host's and
    process's own, so two nodes writing one shared folder never share a
    temporary file, and each rename is atomic. The temporary file goes on
    failure."""
    partial = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.partial")
    try:
        with open(partial, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
