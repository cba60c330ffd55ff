"""SHA-256 of files, and the JSON record a data step leaves next to its
outputs: the checksums of its inputs and what it produced. A rerun whose
inputs have the same checksums reads the record instead of redoing the work,
and the record tells later readers exactly what went in."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def read_record(path: Path, inputs: dict) -> dict | None:
    """The outputs recorded at `path` if they were made from exactly `inputs`."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("inputs") != inputs:
        return None
    return record.get("outputs")


def write_record(path: Path, inputs: dict, outputs: dict) -> None:
    # Written last and atomically: its presence means the outputs are complete.
    tmp = path.with_name(path.name + ".tmp")
    record = {"inputs": inputs, "outputs": outputs}
    try:
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
