"""Tokenizer, corpus readers and the .bin/.idx files: text in, the same token
ids back out through megatron-core's reader, and one-line errors for bad files."""

import json
import lzma
import os
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

from caraml.report import BenchmarkInputError
from llm_training.data import Tokenizer, indexed
from llm_training.data.corpus import documents
from llm_training.data.preprocess import preprocess
from llm_training.data.tokenizer import EOD, train_local_bpe

# A few paragraphs of real prose from the interpreter itself, and text that
# exercises byte-level BPE: accents, CJK, emoji, runs of spaces, tabs.
DOCS = [json.__doc__, re.__doc__, os.__doc__, struct.__doc__,
        "Héllo wörld — 日本語 🙂 it's  two  spaces\n\n\ttabbed 12345 they'll",
        "x"]


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    d = tmp_path_factory.mktemp("bpe")
    vocab, merges = d / "vocab.json", d / "merges.txt"
    train_local_bpe(DOCS, 600, vocab, merges)
    return vocab, merges


@pytest.fixture(scope="module")
def tokenizer(bpe):
    return Tokenizer.from_files(*bpe)


def write_jsonl(path, docs, key="text"):
    path.write_text("".join(json.dumps({key: d, "id": i}) + "\n" for i, d in enumerate(docs)))
    return path


def test_encoding_matches_the_reference_gpt2_bpe(bpe, tokenizer):
    # transformers' slow GPT2Tokenizer is a pure-Python GPT-2 BPE.
    from transformers import GPT2Tokenizer

    reference = GPT2Tokenizer(str(bpe[0]), str(bpe[1]))
    for text in DOCS:
        ids = tokenizer.encode(text)
        assert ids == reference.encode(text)
        assert tokenizer.decode(ids) == text
    assert tokenizer.vocab_size == 600
    assert tokenizer.eod == reference.convert_tokens_to_ids(EOD)


def test_endoftext_inside_text_is_plain_text(tokenizer):
    # As in Megatron's GPT2BPETokenizer: only the appended id ends a document.
    ids = tokenizer.encode(f"a {EOD} b")
    assert tokenizer.eod not in ids
    assert tokenizer.decode(ids) == f"a {EOD} b"


def test_local_bpe_training_is_deterministic(tmp_path, bpe):
    train_local_bpe(DOCS, 600, tmp_path / "v.json", tmp_path / "m.txt")
    assert (tmp_path / "v.json").read_bytes() == bpe[0].read_bytes()
    assert (tmp_path / "m.txt").read_bytes() == bpe[1].read_bytes()


def test_missing_or_broken_tokenizer_files_name_the_file(tmp_path, bpe):
    with pytest.raises(BenchmarkInputError, match=r"vocab file .*nope\.json does not exist"):
        Tokenizer.from_files(tmp_path / "nope.json", bpe[1])
    with pytest.raises(BenchmarkInputError, match=r"merge file .*nope\.txt does not exist"):
        Tokenizer.from_files(bpe[0], tmp_path / "nope.txt")
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": 0,')
    with pytest.raises(BenchmarkInputError,
                       match=r"broken\.json .* not a GPT-2 BPE vocab/merges pair"):
        Tokenizer.from_files(broken, bpe[1])
    no_eod = tmp_path / "no_eod.json"
    vocab = json.loads(bpe[0].read_text())
    del vocab[EOD]
    no_eod.write_text(json.dumps(vocab))
    with pytest.raises(BenchmarkInputError, match=r"no_eod\.json has no <\|endoftext\|> token"):
        Tokenizer.from_files(no_eod, bpe[1])


def test_round_trip_through_megatron_reader(tmp_path, bpe, tokenizer):
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    corpus = write_jsonl(tmp_path / "c.jsonl", DOCS[:3] + ["   \n"] + DOCS[3:])
    prefix = tmp_path / "c_text_document"
    n_docs, n_tokens = preprocess(corpus, prefix, *bpe)

    expected = [tokenizer.encode(d) + [tokenizer.eod] for d in DOCS]  # the blank one is left out
    ds = IndexedDataset(str(prefix))
    assert len(ds) == n_docs == len(DOCS)
    assert [ds[i].tolist() for i in range(len(ds))] == expected
    assert n_tokens == sum(map(len, expected))
    assert ds.index.dtype == np.uint16  # megatron's choice for a vocabulary below 65500
    summary = indexed.check(prefix, tokenizer.vocab_size)
    assert (summary.documents, summary.tokens) == (n_docs, n_tokens)


def test_text_and_xz_corpora_give_the_same_documents(tmp_path, bpe):
    paragraphs = [re.sub(r"\n\s*\n", "\n", d).strip("\n") + "\n" for d in DOCS]
    text = tmp_path / "c.txt"
    text.write_text("\n".join(paragraphs))  # documents end at blank lines
    compressed = tmp_path / "c.jsonl.xz"
    with lzma.open(compressed, "wt", encoding="utf-8") as f:
        f.write(write_jsonl(tmp_path / "c.jsonl", paragraphs).read_text())
    assert list(documents(text)) == list(documents(compressed)) == paragraphs
    assert preprocess(text, tmp_path / "a", *bpe) == preprocess(compressed, tmp_path / "b", *bpe)
    bins = [indexed.paths(tmp_path / name)[0].read_bytes() for name in ("a", "b")]
    assert bins[0] == bins[1]


def test_preprocessing_again_with_the_same_inputs_does_nothing(tmp_path, bpe):
    corpus = write_jsonl(tmp_path / "c.jsonl", DOCS)
    prefix = tmp_path / "c_text_document"
    first = preprocess(corpus, prefix, *bpe)
    stamps = [os.stat(p).st_mtime_ns for p in indexed.paths(prefix)]
    assert preprocess(corpus, prefix, *bpe) == first
    assert [os.stat(p).st_mtime_ns for p in indexed.paths(prefix)] == stamps

    write_jsonl(corpus, DOCS[:2])
    assert preprocess(corpus, prefix, *bpe)[0] == 2


def test_max_documents_reads_only_the_first_records(tmp_path, bpe):
    corpus = write_jsonl(tmp_path / "c.jsonl", DOCS)
    assert preprocess(corpus, tmp_path / "p", *bpe, max_documents=2)[0] == 2


@pytest.mark.parametrize("content, message", [
    ('{"text": "ok"}\n{"text": broken}\n', r"c\.jsonl:2: not valid JSON"),
    ('{"text": "ok"}\n["a list"]\n', r"c\.jsonl:2: not a JSON object"),
    ('{"body": "ok"}\n',
     r"c\.jsonl:1: no 'text' field \(fields: body\); choose one with --json-key"),
    ('{"text": 7}\n', r"c\.jsonl:1: the 'text' field is not a string"),
])
def test_malformed_jsonl_names_file_and_line(tmp_path, bpe, content, message):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(content)
    with pytest.raises(BenchmarkInputError, match=message):
        preprocess(corpus, tmp_path / "p", *bpe)


def test_unreadable_corpora_are_one_line_errors(tmp_path, bpe):
    with pytest.raises(BenchmarkInputError, match=r"corpus file .*absent\.jsonl does not exist"):
        preprocess(tmp_path / "absent.jsonl", tmp_path / "p", *bpe)
    (tmp_path / "c.csv").write_text("a,b\n")
    with pytest.raises(BenchmarkInputError, match=r"c\.csv: unknown format"):
        preprocess(tmp_path / "c.csv", tmp_path / "p", *bpe)
    xz = tmp_path / "c.jsonl.xz"
    xz.write_bytes(lzma.compress(b'{"text": "a"}\n' * 1000)[:60])
    with pytest.raises(BenchmarkInputError, match=r"c\.jsonl\.xz is not a complete xz stream"):
        preprocess(xz, tmp_path / "p", *bpe)
    latin1 = tmp_path / "l.txt"
    latin1.write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(BenchmarkInputError, match=r"l\.txt is not UTF-8 text"):
        preprocess(latin1, tmp_path / "p", *bpe)


def test_preprocess_cli_prints_the_data_line(tmp_path, bpe):
    corpus = write_jsonl(tmp_path / "c.jsonl", DOCS)
    out = subprocess.run(
        [sys.executable, "-m", "llm_training.data.preprocess", "--input", str(corpus),
         "--output-prefix", str(tmp_path / "out" / "mine"), "--vocab-file", str(bpe[0]),
         "--merge-file", str(bpe[1]), "--workers", "1"],
        capture_output=True, text=True, check=True).stdout
    prefix = tmp_path / "out" / "mine_text_document"
    assert out.splitlines()[-1] == (
        f"CARAML data: name=mine_text_document prefix={prefix} vocab_file={bpe[0]} "
        f"merge_file={bpe[1]} documents={len(DOCS)} tokens={indexed.check(prefix).tokens} "
        "tokenizer=gpt2")


# --- .idx/.bin checks -------------------------------------------------------

@pytest.fixture
def dataset(tmp_path):
    prefix = tmp_path / "d"
    indexed.write([[1, 2, 3], [4, 5], [6, 7, 8, 9]], prefix, vocab_size=100)
    return prefix


def test_token_dtype_codes_are_megatrons(dataset):
    from megatron.core.datasets.indexed_dataset import DType

    assert {code: np.dtype(t) for code, t in indexed.TOKEN_DTYPES.items()} == {
        d.value: np.dtype(DType.dtype_from_code(d.value)) for d in DType
        if np.issubdtype(DType.dtype_from_code(d.value), np.integer)}
    summary = indexed.check(dataset, vocab_size=10)
    assert (summary.documents, summary.tokens) == (3, 9)
    assert summary.sequence_lengths.tolist() == [3, 2, 4]


def _patch(path, offset, data):
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage, message", [
    (lambda idx, bin_: idx.write_bytes(idx.read_bytes()[:20]),
     r"d\.idx is truncated: 20 bytes, shorter than the 34-byte header"),
    (lambda idx, bin_: idx.write_bytes(idx.read_bytes()[:-8]),
     r"d\.idx is truncated or corrupt: its header describes 3 sequences and 4 document "
     r"boundaries \(102 bytes\) but the file has 94 bytes"),
    (lambda idx, bin_: _patch(idx, 0, b"NOTANIDX!"), r"d\.idx is not a Megatron \.idx file"),
    (lambda idx, bin_: _patch(idx, 9, struct.pack("<Q", 2)), r"d\.idx has index version 2"),
    (lambda idx, bin_: _patch(idx, 17, b"\x07"),
     r"d\.idx has token dtype code 7, not an integer type"),
    (lambda idx, bin_: _patch(idx, 34 + 12 + 8, struct.pack("<q", 99)),
     r"d\.idx is corrupt: sequence offsets do not follow"),
    (lambda idx, bin_: _patch(idx, 34 + 36 + 24, struct.pack("<q", 2)),
     r"d\.idx is corrupt: document boundaries do not run from 0 to 3"),
    (lambda idx, bin_: bin_.write_bytes(bin_.read_bytes()[:-2]),
     r"d\.bin has 16 bytes but .*d\.idx describes 9 tokens of 2 bytes \(18 bytes\)"),
    (lambda idx, bin_: idx.unlink(), r"data file .*d\.idx does not exist"),
    (lambda idx, bin_: bin_.unlink(), r"data file .*d\.bin does not exist"),
])
def test_damaged_files_give_a_message_naming_them(dataset, damage, message):
    damage(*reversed(indexed.paths(dataset)))
    with pytest.raises(BenchmarkInputError, match=message) as err:
        indexed.check(dataset)
    assert "\n" not in str(err.value)


def test_token_ids_beyond_the_vocabulary_are_rejected(dataset):
    with pytest.raises(BenchmarkInputError, match=r"d\.bin holds token ids from 1 to 9, outside a "
                                                   r"vocabulary of 9 tokens"):
        indexed.check(dataset, vocab_size=9)
