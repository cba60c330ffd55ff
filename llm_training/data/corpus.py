"""Documents from a corpus file, in the formats preprocessing reads:

- `.jsonl` / `.json`: one JSON object per line, the document under a key
  (`text` unless told otherwise), as Megatron's preprocess_data reads them;
- `.txt`: plain UTF-8 text, documents separated by blank lines;

each optionally xz-compressed (`.jsonl.xz`, ...), read as a stream.
"""

from __future__ import annotations

import itertools
import json
import lzma
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from caraml.report import BenchmarkInputError

_JSON_SUFFIXES = (".jsonl", ".json")
_TEXT_SUFFIXES = (".txt",)


def documents(path: Path, json_key: str = "text", limit: int | None = None) -> Iterator[str]:
    """The documents of `path`, at most `limit` of them (counted as records
    read, blank ones included). A missing file or an unknown format fails
    here; a malformed record fails when iteration reaches it."""
    path = Path(path)
    if not path.is_file():
        raise BenchmarkInputError(f"corpus file {path} does not exist")
    base = path.name.removesuffix(".xz")
    if base.endswith(_JSON_SUFFIXES):
        parse = _json_records(json_key)
    elif base.endswith(_TEXT_SUFFIXES):
        parse = _paragraphs
    else:
        raise BenchmarkInputError(
            f"corpus file {path}: unknown format; use .jsonl, .json or .txt, "
            "optionally .xz-compressed")
    return _read(path, parse, limit)


def _read(path: Path, parse, limit: int | None) -> Iterator[str]:
    opener = lzma.open if path.suffix == ".xz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as stream:
            yield from itertools.islice(parse(stream), limit)
    except UnicodeDecodeError as e:
        raise BenchmarkInputError(f"corpus file {path} is not UTF-8 text ({e.reason})") from None
    except (lzma.LZMAError, EOFError) as e:
        raise BenchmarkInputError(f"corpus file {path} is not a complete xz stream ({e})") from None
    except _RecordError as e:
        raise BenchmarkInputError(f"{path}:{e}") from None


class _RecordError(Exception):
    """A bad record; the message starts with its line number."""


def _json_records(key: str):
    def parse(stream: TextIO) -> Iterator[str]:
        for lineno, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise _RecordError(f"{lineno}: not valid JSON ({e.msg})") from None
            if not isinstance(record, dict):
                raise _RecordError(f"{lineno}: not a JSON object")
            if key not in record:
                raise _RecordError(
                    f"{lineno}: no {key!r} field (fields: {', '.join(sorted(record))}); "
                    "choose one with --json-key")
            if not isinstance(record[key], str):
                raise _RecordError(f"{lineno}: the {key!r} field is not a string")
            yield record[key]
    return parse


def _paragraphs(stream: TextIO) -> Iterator[str]:
    lines: list[str] = []
    for line in stream:
        if line.strip():
            lines.append(line)
        elif lines:
            yield "".join(lines)
            lines = []
    if lines:
        yield "".join(lines)
