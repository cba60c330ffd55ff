"""Fetching a file once, and proving it is the file we meant: every file is
checked against its SHA-256 before anything reads it, whether it was just
downloaded or already lay in the output folder."""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from caraml.report import BenchmarkInputError
from llm_training.data.checksums import sha256_file

_CHUNK = 1 << 20
_TIMEOUT_S = 60


@dataclass(frozen=True)
class Source:
    url: str
    filename: str
    # None where no checksum is published: the first copy's SHA-256 is then
    # recorded next to it (sha256sum format) and later runs are held to it.
    sha256: str | None


def fetch(source: Source, out_dir: Path) -> Path:
    """`out_dir/source.filename`, downloaded if missing, verified either way."""
    dest = out_dir / source.filename
    record = dest.with_name(dest.name + ".sha256")
    expected = source.sha256 or _recorded(record)
    if dest.exists():
        actual = sha256_file(dest)
        if expected is not None and actual != expected:
            raise BenchmarkInputError(
                f"checksum mismatch for {dest}: expected sha256 {expected}, got {actual}; "
                f"delete the file to download it again from {source.url}")
    else:
        actual = _download(source.url, dest, expected)
    if expected is None:
        record.write_text(f"{actual}  {dest.name}\n")
        print(f"note: {source.url} has no published SHA-256; recorded {actual} in {record}, "
              "later runs check the file against it", file=sys.stderr)
    return dest


def _recorded(record: Path) -> str | None:
    try:
        return record.read_text().split()[0]
    except (OSError, IndexError):
        return None


def _download(url: str, dest: Path, expected: str | None) -> str:
    """Streams `url` into a partial file and renames it to `dest` only once
    it is complete and matches `expected`; returns its SHA-256."""
    part = dest.with_name(dest.name + ".part")
    digest = hashlib.sha256()
    print(f"downloading {url} -> {dest}", file=sys.stderr, flush=True)
    try:
        with urllib.request.urlopen(url, timeout=_TIMEOUT_S) as response, open(part, "wb") as out:
            announced = response.headers.get("Content-Length")
            received = 0
            while chunk := response.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
                received += len(chunk)
        # A chunked read does not notice a connection that closed early.
        if announced is not None and received < int(announced):
            raise OSError(f"the transfer stopped after {received} of {announced} bytes")
    except (OSError, http.client.HTTPException, ValueError) as e:  # ValueError: a malformed URL
        part.unlink(missing_ok=True)
        detail = e if isinstance(e, urllib.error.HTTPError) else getattr(e, "reason", e)
        raise BenchmarkInputError(
            f"cannot download {url} ({detail}); without network, put the file at {dest} "
            "yourself (its checksum is still verified)") from None
    actual = digest.hexdigest()
    if expected is not None and actual != expected:
        part.unlink()
        raise BenchmarkInputError(
            f"checksum mismatch for {dest} downloaded from {url}: "
            f"expected sha256 {expected}, got {actual}")
    os.replace(part, dest)
    return actual
