"""JUBE's data step: makes a preprocessed dataset in --out-dir and prints
where it is.

    python -m llm_training.data.prepare --corpus oscar|local|PATH --out-dir DIR
        [--vocab-file F --merge-file F] [--json-key text] [--vocab-size 8192]
        [--driver-args-file data.args]

--corpus oscar  the CARAML paper's data: the first 790 records of the 1 GB
                OSCAR sample, with GPT-2's vocab/merges; both downloaded
                once and checked against their SHA-256
--corpus local  needs no network: the docstrings of this Python's standard
                library, tokenised with a byte-level BPE trained on them
--corpus PATH   a .jsonl/.json/.txt file, optionally .xz-compressed

Without --vocab-file/--merge-file, `oscar` downloads GPT-2's, and any other
corpus gets a byte-level BPE of --vocab-size tokens trained on it and saved
in GPT-2's format.
Every step keeps a record of its inputs' checksums, so a second call with
the same inputs does nothing and prints the same line. The last line is

    CARAML data: name=... prefix=... vocab_file=... merge_file=... documents=N
        tokens=N tokenizer=gpt2|local-bpe                      (all on one line)
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import sys
from pathlib import Path

from caraml import report
from caraml.report import BenchmarkInputError
from llm_training.data import sources
from llm_training.data.checksums import read_record, sha256_file, write_record
from llm_training.data.corpus import documents
from llm_training.data.download import fetch
from llm_training.data.local_corpus import build_local_corpus
from llm_training.data.preprocess import Prepared, preprocess
from llm_training.data.tokenizer import Tokenizer, train_local_bpe
from llm_training.model_sizes import SIZES

DEFAULT_VOCAB_SIZE = 8192
# how a JUBE run names the corpus (llm_benchmark_nvidia_amd.yaml)
CORPUS_VARIABLE = "CARAML_LLM_CORPUS"
# one sequence of the longest model sizes: a corpus shorter than this is
# repeated many times over within every sample, and its loss means little
TINY_CORPUS_TOKENS = 2048


def prepare(corpus: str, out_dir: Path, *, vocab_file: Path | None = None,
            merge_file: Path | None = None, json_key: str = "text",
            vocab_size: int | None = None) -> Prepared:
    """Prepares under a lock on the output folder: two runs that need the
    same data at once (two JUBE runs, the work packages of a sweep) would
    otherwise write the same files together; the second waits, then finds
    the data made and does nothing."""
    if (vocab_file is None) != (merge_file is None):
        raise BenchmarkInputError("give --vocab-file and --merge-file together, or neither")
    if vocab_file is not None and vocab_size is not None:
        raise BenchmarkInputError("--vocab-size is for a locally trained BPE; "
                                  "with --vocab-file the vocabulary is that file's")
    out_dir = out_dir.absolute()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchmarkInputError(f"cannot make the data folder {out_dir}: {exc.strerror}; "
                                  "set a writable one") from exc
    with (out_dir / ".prepare.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _prepare(corpus, out_dir, vocab_file, merge_file, json_key, vocab_size)


def _prepare(corpus: str, out_dir: Path, vocab_file: Path | None, merge_file: Path | None,
             json_key: str, vocab_size: int | None) -> Prepared:
    max_documents = None
    if corpus == "oscar":
        corpus_path = fetch(sources.OSCAR, out_dir)
        max_documents = sources.OSCAR_DOCUMENTS
        json_key = sources.OSCAR_JSON_KEY
        name = f"oscar-1GB-first{max_documents}"
        if vocab_file is None:
            vocab_file = fetch(sources.GPT2_VOCAB, out_dir)
            merge_file = fetch(sources.GPT2_MERGES, out_dir)
    elif corpus == "local":
        corpus_path = build_local_corpus(out_dir)
        json_key = "text"
        # The corpus varies with the Python build; its checksum names it exactly.
        name = f"{corpus_path.stem}-{sha256_file(corpus_path)[:8]}"
    else:
        corpus_path = Path(corpus).absolute()
        if not corpus_path.is_file():
            raise BenchmarkInputError(f"corpus file {corpus_path} does not exist (--corpus, "
                                      f"or {CORPUS_VARIABLE} in a JUBE run, takes oscar, local "
                                      "or a file)")
        name = _safe_name(corpus_path.name.removesuffix(".xz").rsplit(".", 1)[0])

    if vocab_file is None:
        tokenizer_kind = "local-bpe"
        vocab_file, merge_file = _local_bpe(corpus_path, json_key, max_documents, out_dir, name,
                                            vocab_size or DEFAULT_VOCAB_SIZE)
        made = Tokenizer.from_files(vocab_file, merge_file).vocab_size
        asked = vocab_size or DEFAULT_VOCAB_SIZE
        if made < asked:
            # the files keep the size asked (it keys the trained BPE's cache);
            # the data's name and this line give the size it came out at
            report.warning(f"the BPE vocabulary trained on {corpus_path.name} has {made} tokens "
                           f"(fewer than the {asked} asked with --vocab-size: the corpus has too "
                           f"little text for more); {vocab_file.name} holds {made}")
        name += f"_local-bpe{made}"
    else:
        tokenizer_kind = "gpt2"
        vocab_file, merge_file = vocab_file.absolute(), merge_file.absolute()

    prefix = out_dir / f"{name}_text_document"
    n_docs, n_tokens = preprocess(corpus_path, prefix, vocab_file, merge_file,
                                  json_key=json_key, max_documents=max_documents)
    return Prepared(name, prefix, vocab_file, merge_file, n_docs, n_tokens, tokenizer_kind)


def _local_bpe(corpus: Path, json_key: str, max_documents: int | None, out_dir: Path, name: str,
               vocab_size: int) -> tuple[Path, Path]:
    """Trains (once) a byte-level BPE on the corpus; returns its vocab and merges."""
    stem = out_dir / f"{name}_local-bpe{vocab_size}"
    vocab_file, merge_file = Path(f"{stem}-vocab.json"), Path(f"{stem}-merges.txt")
    record = Path(f"{stem}.json")
    inputs = {"corpus_sha256": sha256_file(corpus), "json_key": json_key,
              "max_documents": max_documents, "vocab_size": vocab_size}
    if read_record(record, inputs) is None or not (vocab_file.is_file() and merge_file.is_file()):
        texts = documents(corpus, json_key, max_documents)
        train_local_bpe(texts, vocab_size, vocab_file, merge_file)
        write_record(record, inputs, {"vocab_sha256": sha256_file(vocab_file),
                                      "merges_sha256": sha256_file(merge_file)})
    return vocab_file, merge_file


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "corpus"


def unwritable(err: OSError, out_dir: Path) -> str:
    """The one line for a data step the disk stopped: the file and the fix."""
    where = err.filename or out_dir
    return (f"cannot write {where} ({err.strerror or err}); nothing half-written was kept; free "
            f"space in {out_dir.absolute()} or give the data another folder, and run again")


def write_driver_args(path: Path, prepared: Prepared) -> None:
    """The driver's data flags, one per line, for its `@file` argument."""
    path.write_text(f"--data-path={prepared.prefix}\n--vocab-file={prepared.vocab_file}\n"
                    f"--merge-file={prepared.merge_file}\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m llm_training.data.prepare",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 2)[2])
    # the user's choice (CARAML_LLM_CORPUS, CARAML_LLM_DATA) before the system's
    # defaults that the LLM JUBE scripts export (CARAML_DEFAULT_CORPUS, CARAML_DATA_DIR)
    corpus = os.environ.get("CARAML_LLM_CORPUS") or os.environ.get("CARAML_DEFAULT_CORPUS")
    out_dir = os.environ.get("CARAML_LLM_DATA") or os.environ.get("CARAML_DATA_DIR")
    p.add_argument("--corpus", required=not corpus, default=corpus,
                   help="oscar, local, or a corpus file (default: $CARAML_LLM_CORPUS, else "
                        "$CARAML_DEFAULT_CORPUS)")
    p.add_argument("--out-dir", required=not out_dir, default=out_dir, type=Path,
                   help="where the prepared data goes (default: $CARAML_LLM_DATA, else "
                        "$CARAML_DATA_DIR)")
    p.add_argument("--vocab-file", type=Path, help="GPT-2-format vocab.json")
    p.add_argument("--merge-file", type=Path, help="GPT-2-format merges.txt")
    p.add_argument("--json-key", default="text", help="the document's field in a jsonl corpus")
    p.add_argument("--vocab-size", type=int,
                   help=f"tokens of a locally trained BPE (default {DEFAULT_VOCAB_SIZE})")
    p.add_argument("--driver-args-file", type=Path,
                   help="also write the driver's --data-path/--vocab-file/--merge-file here")
    p.add_argument("--seq-length", type=int,
                   help="the training run's sequence length: a corpus of fewer tokens is "
                        "warned about (default: that of --model-size, else "
                        f"{TINY_CORPUS_TOKENS}, the longest model sizes')")
    p.add_argument("--model-size", choices=sorted(SIZES),
                   help="the model size the data is for: its sequence length is the run's")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        prepared = prepare(args.corpus, args.out_dir, vocab_file=args.vocab_file,
                           merge_file=args.merge_file, json_key=args.json_key,
                           vocab_size=args.vocab_size)
    except BenchmarkInputError as e:
        report.error(str(e))
        return 1
    except OSError as e:  # a full disk or a quota: nothing half-written is kept
        report.error(unwritable(e, args.out_dir))
        return 1
    if args.driver_args_file is not None:
        write_driver_args(args.driver_args_file, prepared)
    seq_length = args.seq_length or (SIZES[args.model_size].seq_length if args.model_size
                                     else TINY_CORPUS_TOKENS)
    if prepared.tokens < seq_length:
        report.warning(f"corpus {prepared.name} has only {prepared.tokens} tokens: fewer than "
                       f"one {seq_length}-token sequence; training repeats it over and "
                       "over, so throughput is measured but the loss means little")
    prepared.emit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
