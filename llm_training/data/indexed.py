"""Megatron's indexed dataset on disk: `<prefix>.bin` holds the token ids of
all documents back to back, `<prefix>.idx` says where each one starts.
Writing goes through megatron-core's IndexedDatasetBuilder; reading is
megatron-core's too, but only after `check` has found the pair sound, so
that a damaged file stops a run with a message that names it instead of a
numpy traceback from inside megatron-core.

The .idx layout (megatron/core/datasets/indexed_dataset.py, version 1):

    9 bytes  b"MMIDIDX\\x00\\x00"
    u64      version (1)
    u8       token dtype code
    u64      S, the number of sequences
    u64      D, the number of document boundaries (documents + 1)
    i32[S]   sequence lengths in tokens
    i64[S]   sequence byte offsets into .bin
    i64[D]   document boundaries as sequence indices: 0, ..., S
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from caraml.report import BenchmarkInputError

_MAGIC = b"MMIDIDX\x00\x00"
_HEADER = struct.Struct("<9sQBQQ")
# megatron-core's integer DType codes (indexed_dataset.DType), repeated so
# that a check needs no megatron-core import; test_data_preprocess compares them.
# GPT-2's vocabulary padded as Megatron pads it: the largest the data steps
# make, so an id beyond it is no token of any of them
LARGEST_VOCABULARY = 50304
TOKEN_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}


@dataclass(frozen=True)
class IndexedSummary:
    sequence_lengths: np.ndarray  # tokens per sequence (one sequence per document if made here)
    documents: int
    tokens: int


def paths(prefix: str | os.PathLike) -> tuple[Path, Path]:
    return Path(f"{prefix}.bin"), Path(f"{prefix}.idx")


def check(prefix: str | os.PathLike, vocab_size: int | None = None) -> IndexedSummary:
    """Verifies that `prefix`.bin/.idx form a sound Megatron dataset (and
    that every token id is below `vocab_size`, if given); raises
    BenchmarkInputError naming the file and the problem otherwise."""
    bin_path, idx_path = paths(prefix)
    for path in (idx_path, bin_path):
        if not path.is_file():
            raise BenchmarkInputError(f"data file {path} does not exist (data prefix {prefix})")

    raw = np.fromfile(idx_path, dtype=np.uint8)
    if raw.size < _HEADER.size:
        raise BenchmarkInputError(
            f"{idx_path} is truncated: {raw.size} bytes, "
            f"shorter than the {_HEADER.size}-byte header")
    magic, version, code, n_seq, n_bounds = _HEADER.unpack_from(raw)
    if magic != _MAGIC:
        raise BenchmarkInputError(f"{idx_path} is not a Megatron .idx file (bad magic bytes)")
    if version != 1:
        raise BenchmarkInputError(
            f"{idx_path} has index version {version}; only version 1 is known")
    if code not in TOKEN_DTYPES:
        raise BenchmarkInputError(f"{idx_path} has token dtype code {code}, not an integer type")
    expected = _HEADER.size + n_seq * (4 + 8) + n_bounds * 8
    if raw.size != expected:
        raise BenchmarkInputError(
            f"{idx_path} is truncated or corrupt: its header describes {n_seq} sequences and "
            f"{n_bounds} document boundaries ({expected} bytes) but the file has {raw.size} bytes")

    offset = _HEADER.size
    lengths = raw[offset:offset + 4 * n_seq].view("<i4")
    offset += lengths.nbytes
    pointers = raw[offset:offset + 8 * n_seq].view("<i8")
    offset += pointers.nbytes
    bounds = raw[offset:].view("<i8")

    if n_seq == 0:
        raise BenchmarkInputError(f"{idx_path} holds no documents")
    if (lengths < 0).any():
        raise BenchmarkInputError(f"{idx_path} is corrupt: negative sequence lengths")
    dtype = np.dtype(TOKEN_DTYPES[code])
    starts = np.concatenate(([0], np.cumsum(lengths[:-1], dtype=np.int64))) * dtype.itemsize
    if not np.array_equal(pointers, starts):
        raise BenchmarkInputError(
            f"{idx_path} is corrupt: sequence offsets do not follow from the sequence lengths")
    if n_bounds < 2 or bounds[0] != 0 or bounds[-1] != n_seq or (np.diff(bounds) < 0).any():
        raise BenchmarkInputError(
            f"{idx_path} is corrupt: document boundaries do not run from 0 to {n_seq} sequences")

    tokens = int(lengths.sum(dtype=np.int64))
    if tokens == 0:
        raise BenchmarkInputError(f"{idx_path} describes documents without any tokens")
    bin_size = bin_path.stat().st_size
    if bin_size != tokens * dtype.itemsize:
        raise BenchmarkInputError(
            f"{bin_path} has {bin_size} bytes but {idx_path} describes {tokens} tokens of "
            f"{dtype.itemsize} bytes ({tokens * dtype.itemsize} bytes): truncated, or not its .idx")
    if vocab_size is not None:
        ids = np.memmap(bin_path, dtype=dtype, mode="r")
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocab_size:
            in_any = 0 <= low and high < LARGEST_VOCABULARY
            cause = ("it was tokenised with another vocabulary" if in_any
                     else f"ids outside 0 to {LARGEST_VOCABULARY - 1} are no token of any vocabulary "
                          "the data steps make: the file is damaged; prepare the data again")
            raise BenchmarkInputError(
                f"{bin_path} holds token ids from {low} to {high}, outside a vocabulary of "
                f"{vocab_size} tokens; {cause}")
    return IndexedSummary(np.array(lengths), documents=int(n_bounds) - 1, tokens=tokens)


def write(documents: Iterable[Sequence[int]], prefix: str | os.PathLike, vocab_size: int) -> None:
    """Writes one sequence per document, under temporary names that are
    renamed to `prefix`.bin/.idx once both are complete."""
    from megatron.core.datasets.indexed_dataset import DType, IndexedDatasetBuilder

    bin_path, idx_path = paths(prefix)
    # a name of this process's own: two writers of one prefix never share a file
    bin_tmp, idx_tmp = paths(f"{prefix}.tmp{os.getpid()}")
    try:
        builder = IndexedDatasetBuilder(str(bin_tmp), dtype=DType.optimal_dtype(vocab_size))
        for ids in documents:
            builder.add_document(np.asarray(ids), [len(ids)])
        builder.finalize(str(idx_tmp))
        for done in (bin_tmp, idx_tmp):  # on disk before the names say complete
            with open(done, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(bin_tmp, bin_path)
        os.replace(idx_tmp, idx_path)
    except BaseException:
        for partial in (bin_tmp, idx_tmp):
            partial.unlink(missing_ok=True)
        raise
