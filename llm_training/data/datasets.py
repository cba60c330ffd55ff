"""The training and validation datasets the driver samples from: megatron-
core's GPTDataset over a preprocessed corpus, or synthetic token ids.

Every item is a dict of four tensors of `seq_length` elements, as
megatron-core's GPTDataset gives them (without its attention mask, which
the models build themselves):

    tokens        int64  the input token ids
    labels        int64  the token after each input token
    loss_mask     float  1.0 where the loss counts
    position_ids  int64  0 .. seq_length-1
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from caraml.report import BenchmarkInputError
from llm_training.data import indexed


def build_datasets(*, data_prefix: str | None, synthetic: bool, vocab_size: int, seq_length: int,
                   split: str = "949,50,1", num_train_samples: int, num_valid_samples: int,
                   seed: int, path_to_cache: str | None = None) -> tuple[Dataset, Dataset | None]:
    """(train, valid) datasets of exactly `num_train_samples` and
    `num_valid_samples` items; valid is None when no validation samples are
    asked for.

    Real data (`data_prefix`, the path without .bin/.idx) is split by
    documents in the proportions of `split` (train,valid,test; the test part
    is set aside and never read) and sampled by megatron-core's GPTDataset,
    which shuffles with `seed` and repeats epochs as needed. Its index caches
    go to `path_to_cache` (default: $CARAML_LLM_CACHE, else a `cache` folder
    beside the data); a cache that is not whole is removed and built again.
    Under torch.distributed, rank 0 builds the caches while the other ranks
    wait, then they load them: call this on every rank.

    Synthetic data draws token ids uniformly from [0, vocab_size), the same
    for a given seed on every rank and in every run.

    Bad input (missing or damaged files, token ids outside the vocabulary, a
    split without documents) raises BenchmarkInputError before any index is
    built."""
    if synthetic == (data_prefix is not None):
        raise BenchmarkInputError(
            "give either a data prefix or synthetic data, not both or neither")
    for name, value, least in (("vocab_size", vocab_size, 1), ("seq_length", seq_length, 1),
                               ("num_train_samples", num_train_samples, 1),
                               ("num_valid_samples", num_valid_samples, 0), ("seed", seed, 0)):
        if value < least:
            raise BenchmarkInputError(f"{name} must be at least {least}, got {value}")
    if synthetic:
        train = SyntheticGPTDataset(num_train_samples, seq_length, vocab_size, seed, stream=0)
        valid = SyntheticGPTDataset(num_valid_samples, seq_length, vocab_size, seed, stream=1)
    else:
        train, valid = _gpt_datasets(data_prefix, vocab_size, seq_length, split,
                                     num_train_samples, num_valid_samples, seed, path_to_cache)
    return train, (valid if num_valid_samples else None)


class SyntheticGPTDataset(Dataset):
    """Uniformly random token ids; item i depends only on (seed, stream, i),
    so any worker or rank that reads it gets the same sample."""

    def __init__(self, num_samples: int, seq_length: int, vocab_size: int, seed: int,
                 stream: int) -> None:
        self.num_samples = num_samples
        self.seq_length = seq_length
        self.vocab_size = vocab_size
        self.seed = seed
        self.stream = stream
        self._loss_mask = torch.ones(seq_length, dtype=torch.float)
        self._position_ids = torch.arange(seq_length, dtype=torch.long)

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, idx: int) -> dict[str, torch.Tensor]:
        if not 0 <= idx < self.num_samples:
            raise IndexError(idx)
        rng = np.random.default_rng([self.seed, self.stream, idx])
        text = torch.from_numpy(rng.integers(0, self.vocab_size, self.seq_length + 1))
        return {"tokens": text[:-1], "labels": text[1:], "loss_mask": self._loss_mask.clone(),
                "position_ids": self._position_ids.clone()}


@dataclass(frozen=True)
class _TokenIds:
    """What megatron-core's GPTDataset asks of a tokenizer when the data is
    already tokenised. `eod` would matter only for the EOD-based masks and
    position resets, which stay off here."""

    vocab_size: int
    eod: None = None

    @property
    def unique_identifiers(self) -> dict:  # goes into the index cache's key
        return {"vocab_size": self.vocab_size}


_SPLIT = re.compile(r"\d+(\.\d*)?(,\d+(\.\d*)?){0,2}")
# where the index caches go when the caller names no folder (a JUBE run
# passes it through the job's environment)
CACHE_VARIABLE = "CARAML_LLM_CACHE"
# the files of one index cache: <hash>-GPTDataset-<split>-<part>
_CACHE_PARTS = ("description.txt", "document_index.npy", "sample_index.npy", "shuffle_index.npy")


def drop_damaged_caches(cache: str) -> list[str]:
    """Removes every index cache in `cache` with a part that does not load
    whole (a build cut short by a full disk or a kill: megatron-core writes
    the parts in place and would trust them for ever); returns one line per
    cache removed. megatron-core builds a cache again when a part is gone."""
    groups: dict[str, list[str]] = {}
    for name in sorted(os.listdir(cache)) if os.path.isdir(cache) else []:
        for part in _CACHE_PARTS:
            if name.endswith(f"-{part}"):
                groups.setdefault(name.removesuffix(f"-{part}"), []).append(name)
    removed = []
    for base, names in groups.items():
        why = ""
        for name in names:
            if name.endswith(".npy"):
                try:
                    np.load(os.path.join(cache, name), allow_pickle=False, mmap_mode="r")
                except Exception as err:  # noqa: BLE001 - numpy's errors for a cut file vary
                    why = f"{name}: {' '.join(str(err).split())}"
                    break
        if why:
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(cache, name))
            removed.append(f"{os.path.join(cache, base)}-*: {why}")
    return removed


def _builds_caches() -> bool:
    """Whether this process builds the index caches (rank 0, or no torch.distributed)."""
    return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0


def _gpt_datasets(data_prefix: str, vocab_size: int, seq_length: int, split: str,
                  num_train: int, num_valid: int, seed: int,
                  path_to_cache: str | None) -> tuple[Dataset, Dataset | None]:
    import megatron.core.datasets as mcore_datasets
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import Split

    try:  # GPTDataset builds its sample index with this compiled extension
        from megatron.core.datasets import helpers  # noqa: F401
    except ImportError as e:
        folder = os.path.dirname(mcore_datasets.__file__)
        raise BenchmarkInputError(
            f"megatron-core's compiled dataset helpers do not import ({e}); the PyPI wheels ship "
            f"them, a source install builds them with: make -C {folder}") from None

    split = "".join(split.split())
    if not _SPLIT.fullmatch(split) or not any(float(w) for w in split.split(",")):
        raise BenchmarkInputError(
            f"split {split!r} is not up to three comma-separated weights for train,valid,test "
            "with a positive sum, like 949,50,1")
    prefix = os.path.abspath(os.fspath(data_prefix).removesuffix(".bin").removesuffix(".idx"))
    try:
        summary = indexed.check(prefix, vocab_size)
    except BenchmarkInputError as damaged:
        raise BenchmarkInputError(
            f"{damaged}; data the suite's data step made is checked and made again when the "
            "benchmark runs again, other data must be made again by hand") from None
    cache = os.path.abspath(path_to_cache or os.environ.get(CACHE_VARIABLE)
                            or os.path.join(os.path.dirname(prefix), "cache"))
    if _builds_caches():
        for line in drop_damaged_caches(cache):
            print(f"removed the damaged index cache {line}; it is built again", file=sys.stderr)
    config = GPTDatasetConfig(
        random_seed=seed, sequence_length=seq_length, blend=([prefix], None), split=split,
        path_to_cache=cache, tokenizer=_TokenIds(vocab_size), reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False)

    wanted = {Split.train: num_train, Split.valid: num_valid, Split.test: 0}
    for part, samples in wanted.items():
        bookends = config.split_matrix[part.value]
        if samples == 0:
            # A None entry is megatron-core's "no such split": nothing is
            # indexed for it (an empty split would otherwise never finish).
            config.split_matrix[part.value] = None
        elif bookends is None or _split_tokens(summary.sequence_lengths, bookends) == 0:
            raise BenchmarkInputError(
                f"split {split!r} leaves no {part.name} documents in {prefix} "
                f"({summary.documents} documents in all); change the split or use a larger corpus")

    builder = BlendedMegatronDatasetBuilder(GPTDataset, [num_train, num_valid, 0],
                                            lambda: True, config)
    try:
        train, valid, _ = builder.build()
    except Exception as e:
        # Under torch.distributed, megatron-core wraps the OSError.
        cause = e if isinstance(e, OSError) else e.__cause__
        if not isinstance(cause, OSError):
            raise
        if _builds_caches():
            drop_damaged_caches(cache)
        raise BenchmarkInputError(
            f"megatron-core could not build its index cache in {cache} ({cause}); what it wrote "
            f"there was removed; free space there, or set {CACHE_VARIABLE} to a folder with room, "
            "and run again") from None
    return _first(train, num_train), _first(valid, num_valid)


def _split_tokens(sequence_lengths: np.ndarray, bookends: tuple[float, float]) -> int:
    # The same rounding as BlendedMegatronDatasetBuilder's split of sequences.
    n = sequence_lengths.shape[0]
    begin, end = (round(b * float(n)) for b in bookends)
    return int(sequence_lengths[begin:end].sum())


def _first(dataset: Dataset | None, n: int) -> Dataset | None:
    """GPTDataset rounds up to whole epochs; the run asked for n samples."""
    return None if dataset is None else Subset(dataset, range(n))
