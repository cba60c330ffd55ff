"""Tokenises a corpus file into a Megatron indexed dataset, each document
followed by <|endoftext|> (Megatron's preprocess_data with --append-eod).

    python -m llm_training.data.preprocess --input corpus.jsonl \\
        --output-prefix out/name --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt

writes out/name_text_document.{bin,idx,json} (Megatron's naming: prefix,
json key, "document") and prints the same `CARAML data:` line as
llm_training.data.prepare. The .json record holds the SHA-256 of every
input; a rerun with the same inputs does nothing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from caraml import report
from caraml.report import BenchmarkInputError
from llm_training.data import indexed
from llm_training.data.checksums import read_record, sha256_file, write_record
from llm_training.data.corpus import documents
from llm_training.data.tokenizer import Tokenizer

_BATCH = 512  # documents per encode_batch call: enough to keep all cores busy
_FORMAT = 1  # bump when the same inputs would give different .bin/.idx


@dataclass(frozen=True)
class Prepared:
    """A preprocessed dataset: the fields of the `CARAML data:` line."""

    name: str
    prefix: Path
    vocab_file: Path
    merge_file: Path
    documents: int
    tokens: int
    tokenizer: str  # "gpt2" or "local-bpe"

    def emit(self) -> None:
        path = report.path_value
        report.emit("data", name=self.name, prefix=path(self.prefix),
                    vocab_file=path(self.vocab_file), merge_file=path(self.merge_file),
                    documents=self.documents, tokens=self.tokens, tokenizer=self.tokenizer)


def preprocess(corpus: Path, prefix: Path, vocab_file: Path, merge_file: Path, *,
               json_key: str = "text", max_documents: int | None = None) -> tuple[int, int]:
    """Writes `prefix`.bin/.idx from `corpus` unless its record shows the
    same inputs; returns (documents, tokens). Blank documents are left out."""
    tokenizer = Tokenizer.from_files(vocab_file, merge_file)
    texts = documents(corpus, json_key, max_documents)
    inputs = {"format": _FORMAT, "corpus": str(corpus), "corpus_sha256": sha256_file(corpus),
              "vocab_sha256": sha256_file(vocab_file), "merges_sha256": sha256_file(merge_file),
              "json_key": json_key, "max_documents": max_documents}
    record_path = Path(f"{prefix}.json")
    done = read_record(record_path, inputs)
    if done is not None and all(p.is_file() for p in indexed.paths(prefix)):
        try:  # what a rerun would train on is checked before it is trusted
            indexed.check(prefix, tokenizer.vocab_size)
            return done["documents"], done["tokens"]
        except BenchmarkInputError as damaged:
            report.warning(f"{damaged}; it is made again")

    record_path.unlink(missing_ok=True)
    counts = {"documents": 0, "tokens": 0}

    def token_docs() -> Iterator[list[int]]:
        for batch in _batched((t for t in texts if t.strip()), _BATCH):
            for ids in tokenizer.encode_batch(batch):
                ids.append(tokenizer.eod)
                counts["documents"] += 1
                counts["tokens"] += len(ids)
                yield ids

    indexed.write(token_docs(), prefix, tokenizer.vocab_size)
    if counts["documents"] == 0:
        raise BenchmarkInputError(f"corpus file {corpus} holds no documents")
    write_record(record_path, inputs, counts)
    return counts["documents"], counts["tokens"]


def _batched(items, n: int):
    it = iter(items)
    while batch := list(itertools.islice(it, n)):
        yield batch


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m llm_training.data.preprocess",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, type=Path,
                   help=".jsonl/.json/.txt corpus, optionally .xz-compressed")
    p.add_argument("--output-prefix", required=True, type=Path,
                   help="the dataset is written to <this>_<json-key>_document.{bin,idx}")
    p.add_argument("--vocab-file", required=True, type=Path)
    p.add_argument("--merge-file", required=True, type=Path)
    p.add_argument("--json-key", default="text")
    p.add_argument("--max-documents", type=int, help="read only the first N records")
    p.add_argument("--workers", type=int,
                   help="tokenizer threads (default: all cores)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.workers is not None:
        # tokenizers' thread pool reads this when it first starts.
        os.environ["RAYON_NUM_THREADS"] = str(args.workers)
    prefix = Path(f"{args.output_prefix}_{args.json_key}_document").absolute()
    vocab_file, merge_file = args.vocab_file.absolute(), args.merge_file.absolute()
    try:
        prefix.parent.mkdir(parents=True, exist_ok=True)
        n_docs, n_tokens = preprocess(args.input, prefix, vocab_file, merge_file,
                                      json_key=args.json_key, max_documents=args.max_documents)
    except BenchmarkInputError as e:
        report.error(str(e))
        return 1
    Prepared(prefix.name, prefix, vocab_file, merge_file, n_docs, n_tokens, "gpt2").emit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
