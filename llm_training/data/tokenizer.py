"""GPT-2's byte-level BPE, read from a vocab.json + merges.txt pair with the
`tokenizers` library, and the training of a small one of the same format
for hosts that cannot download GPT-2's files."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import tokenizers
from tokenizers import decoders, models, pre_tokenizers, trainers

from caraml.report import BenchmarkInputError

EOD = "<|endoftext|>"


def _byte_level(model: models.BPE) -> tokenizers.Tokenizer:
    # GPT-2 splits text with its regex (ByteLevel's default) and adds no
    # leading space; the decoder maps the byte alphabet back to UTF-8.
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


class Tokenizer:
    """GPT-2 BPE tokenizer. <|endoftext|> is not treated as special inside
    text (as in Megatron's GPT2BPETokenizer): it only enters a token stream
    as the `eod` id appended after each document."""

    def __init__(self, backend: tokenizers.Tokenizer, eod: int) -> None:
        self._backend = backend
        self.eod = eod

    @classmethod
    def from_files(cls, vocab_file: str | os.PathLike, merge_file: str | os.PathLike) -> Tokenizer:
        for kind, path in (("vocab file", vocab_file), ("merge file", merge_file)):
            if not Path(path).is_file():
                raise BenchmarkInputError(f"{kind} {path} does not exist")
        try:
            model = models.BPE.from_file(str(vocab_file), str(merge_file))
        except Exception as e:  # noqa: BLE001 - tokenizers raises a bare Exception with a clear message
            raise BenchmarkInputError(
                f"{vocab_file} and {merge_file} are not a GPT-2 BPE vocab/merges pair: {e}"
            ) from None
        backend = _byte_level(model)
        eod = backend.token_to_id(EOD)
        if eod is None:
            raise BenchmarkInputError(f"vocab file {vocab_file} has no {EOD} token")
        return cls(backend, eod)

    @property
    def vocab_size(self) -> int:
        return self._backend.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self._backend.encode(text).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Like encode, on all cores at once."""
        return [e.ids for e in self._backend.encode_batch(list(texts))]

    def decode(self, ids: Sequence[int]) -> str:
        return self._backend.decode(list(ids), skip_special_tokens=False)


def train_local_bpe(documents: Iterable[str], vocab_size: int, vocab_file: Path,
                    merge_file: Path) -> None:
    """Trains a byte-level BPE of `vocab_size` tokens (<|endoftext|> included)
    on `documents` and saves it as GPT-2-format vocab.json and merges.txt.
    The result depends only on the documents: tokenizers' trainer is
    deterministic."""
    if vocab_size < 257:
        raise BenchmarkInputError(
            f"--vocab-size {vocab_size} is too small: a byte-level BPE needs the 256 bytes "
            f"and {EOD}")
    tok = _byte_level(models.BPE())
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(documents, trainer)
    # The model saves as <prefix>-vocab.json and <prefix>-merges.txt; a
    # scratch folder lets both land under the caller's names at once.
    with tempfile.TemporaryDirectory(dir=vocab_file.parent) as scratch:
        vocab_tmp, merges_tmp = tok.model.save(scratch, "bpe")
        os.replace(vocab_tmp, vocab_file)
        os.replace(merges_tmp, merge_file)
