"""The data step's CLI: the network-free local corpus, the OSCAR path with
downloads served from this machine, checksum verification, and the line
that JUBE reads."""

import contextlib
import email
import hashlib
import http.server
import io
import json
import lzma
import os
import pathlib
import re
import subprocess
import sys
import threading
import urllib.parse
from functools import partial

import pytest

from caraml.report import BenchmarkInputError
from llm_training.data import Tokenizer, indexed, sources
from llm_training.data.download import Source, fetch
from llm_training.data.prepare import main
from llm_training.data.tokenizer import train_local_bpe

LINE = re.compile(r"CARAML data: name=(?P<name>\S+) prefix=(?P<prefix>\S+) "
                  r"vocab_file=(?P<vocab_file>\S+) merge_file=(?P<merge_file>\S+) "
                  r"documents=(?P<documents>\d+) tokens=(?P<tokens>\d+) "
                  r"tokenizer=(?P<tokenizer>gpt2|local-bpe)")


def run(capsys, *argv):
    """(exit code, fields of the data line or None, stderr)."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    match = LINE.fullmatch(lines[-1]) if lines else None
    return code, (match.groupdict() if match else None), captured.err


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- fetching with checksums --------------------------------------------------

@contextlib.contextmanager
def serving(handler):
    """An HTTP server on localhost for the duration; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join()


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def served(tmp_path):
    """A folder served over HTTP: (folder, base URL)."""
    root = tmp_path / "served"
    root.mkdir()
    with serving(partial(QuietFiles, directory=str(root))) as url:
        yield root, url


def test_fetch_downloads_a_file_with_the_right_checksum(served, tmp_path):
    root, url = served
    (root / "f.bin").write_bytes(b"payload" * 1000)
    dest = fetch(Source(f"{url}/f.bin", "f.bin", sha256(b"payload" * 1000)), tmp_path)
    assert dest == tmp_path / "f.bin" and dest.read_bytes() == b"payload" * 1000
    assert not (tmp_path / "f.bin.part").exists()


def test_fetch_rejects_a_download_with_another_checksum(served, tmp_path):
    root, url = served
    (root / "f.bin").write_bytes(b"tampered")
    expected = sha256(b"payload")
    with pytest.raises(BenchmarkInputError, match=(
            rf"checksum mismatch for .*f\.bin downloaded from {url}/f\.bin: "
            rf"expected sha256 {expected}, got {sha256(b'tampered')}")):
        fetch(Source(f"{url}/f.bin", "f.bin", expected), tmp_path)
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "f.bin.part").exists()


def test_fetch_checks_a_file_that_is_already_there(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"old and wrong")
    source = Source("file:///nowhere/f.bin", "f.bin", sha256(b"right"))
    with pytest.raises(BenchmarkInputError, match=(
            rf"checksum mismatch for .*f\.bin: expected sha256 {sha256(b'right')}, "
            rf"got {sha256(b'old and wrong')}; delete")):
        fetch(source, tmp_path)
    (tmp_path / "f.bin").write_bytes(b"right")
    assert fetch(source, tmp_path).read_bytes() == b"right"  # no download needed


def test_fetch_without_network_says_where_to_put_the_file(served, tmp_path):
    _, url = served
    with pytest.raises(BenchmarkInputError, match=(
            rf"cannot download {url}/absent\.bin \(HTTP Error 404.*put the file at .*absent\.bin "
            "yourself")):
        fetch(Source(f"{url}/absent.bin", "absent.bin", None), tmp_path)


def test_a_transfer_that_stops_short_is_not_kept(tmp_path):
    class Truncating(QuietFiles):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"only ten b")

    with serving(Truncating) as url, pytest.raises(BenchmarkInputError, match=(
            r"cannot download http://\S+/f\.bin \(the transfer stopped after 10 of 1000 bytes\)")):
        fetch(Source(f"{url}/f.bin", "f.bin", None), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_unpublished_checksum_is_recorded_then_enforced(tmp_path, capsys):
    origin = tmp_path / "origin.bin"
    origin.write_bytes(b"first copy")
    out = tmp_path / "out"
    out.mkdir()
    source = Source(origin.as_uri(), "copy.bin", None)
    fetch(source, out)
    assert (out / "copy.bin.sha256").read_text() == f"{sha256(b'first copy')}  copy.bin\n"
    assert "no published SHA-256" in capsys.readouterr().err
    (out / "copy.bin").write_bytes(b"changed later")
    with pytest.raises(BenchmarkInputError, match=rf"expected sha256 {sha256(b'first copy')}"):
        fetch(source, out)


# --- the OSCAR path, served from this machine ----------------------------------

@pytest.fixture
def fake_upstream(tmp_path, monkeypatch):
    """OSCAR-like jsonl.xz and a GPT-2-format tokenizer behind file:// URLs,
    pinned with their true checksums, in place of the real sources."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    texts = [f"Record {i}: {json.__doc__.splitlines()[i % 5]}" for i in range(30)]
    oscar = upstream / "oscar.jsonl.xz"
    oscar.write_bytes(lzma.compress("".join(json.dumps({"id": i, "text": t}) + "\n"
                                            for i, t in enumerate(texts)).encode()))
    train_local_bpe(texts, 300, upstream / "encoder.json", upstream / "vocab.bpe")
    pinned = {name: sha256((upstream / name).read_bytes())
              for name in ("encoder.json", "vocab.bpe")}
    monkeypatch.setattr(sources, "OSCAR", Source(oscar.as_uri(), "oscar-1GB.jsonl.xz", None))
    monkeypatch.setattr(sources, "OSCAR_DOCUMENTS", 12)
    monkeypatch.setattr(sources, "GPT2_VOCAB", Source((upstream / "encoder.json").as_uri(),
                                                      "gpt2-vocab.json", pinned["encoder.json"]))
    monkeypatch.setattr(sources, "GPT2_MERGES", Source((upstream / "vocab.bpe").as_uri(),
                                                       "gpt2-merges.txt", pinned["vocab.bpe"]))
    return upstream


def test_oscar_downloads_checks_and_takes_the_first_records(fake_upstream, tmp_path, capsys):
    out = tmp_path / "data"
    code, line, _ = run(capsys, "--corpus", "oscar", "--out-dir", out)
    assert code == 0
    assert line["name"] == "oscar-1GB-first12" and line["tokenizer"] == "gpt2"
    assert line["vocab_file"] == str(out / "gpt2-vocab.json")
    assert line["merge_file"] == str(out / "gpt2-merges.txt")
    assert (out / "gpt2-vocab.json").read_bytes() == (fake_upstream / "encoder.json").read_bytes()
    assert (out / "oscar-1GB.jsonl.xz.sha256").exists()
    assert int(line["documents"]) == 12
    assert indexed.check(line["prefix"]).tokens == int(line["tokens"])


def test_a_tampered_download_stops_with_one_line(fake_upstream, tmp_path, capsys):
    (fake_upstream / "vocab.bpe").write_text((fake_upstream / "vocab.bpe").read_text() + "x y\n")
    code, line, err = run(capsys, "--corpus", "oscar", "--out-dir", tmp_path / "data")
    assert code == 1 and line is None
    assert err.count("CARAML ERROR") == 1  # before it: the download notes
    assert re.fullmatch(r"CARAML ERROR: checksum mismatch for \S+/gpt2-merges\.txt downloaded from "
                        r"file://\S+/vocab\.bpe: expected sha256 [0-9a-f]{64}; got [0-9a-f]{64}",
                        err.splitlines()[-1])  # caraml.report turns commas into semicolons


# --- the local corpus -----------------------------------------------------------

@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """`--corpus local` from scratch, then again: (out dir, both outputs,
    file times after the first)."""
    out = tmp_path_factory.mktemp("local")
    outputs, stamps = [], None
    for _ in range(2):
        stdout = io.StringIO()
        with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(stdout):
            mp.chdir(out)
            code = main(["--corpus", "local", "--out-dir", str(out / "data"),
                         "--driver-args-file", "data.args"])
        assert code == 0
        outputs.append(stdout.getvalue())
        stamps = stamps or {p: p.stat().st_mtime_ns for p in (out / "data").iterdir()}
    return out, outputs, stamps


def test_local_corpus_needs_no_network_and_says_what_it_is(local_run):
    out, outputs, _ = local_run
    line = LINE.fullmatch(outputs[0].splitlines()[-1]).groupdict()
    assert re.fullmatch(r"local-pydoc-py[\d.]+-[0-9a-f]{8}_local-bpe8192", line["name"])
    assert line["tokenizer"] == "local-bpe"
    assert line["prefix"] == str(out / "data" / f"{line['name']}_text_document")
    summary = indexed.check(line["prefix"], vocab_size=8192)
    assert (summary.documents, summary.tokens) == (int(line["documents"]), int(line["tokens"]))
    assert summary.documents > 300 and summary.tokens > 200_000  # a real corpus, not a toy
    tokenizer = Tokenizer.from_files(line["vocab_file"], line["merge_file"])
    assert tokenizer.vocab_size == 8192
    assert (out / "data.args").read_text() == (f"--data-path={line['prefix']}\n"
                                              f"--vocab-file={line['vocab_file']}\n"
                                              f"--merge-file={line['merge_file']}\n")


def test_a_second_call_does_nothing_and_prints_the_same_line(local_run):
    out, outputs, stamps = local_run
    assert outputs[0].splitlines()[-1] == outputs[1].splitlines()[-1]
    assert {p: p.stat().st_mtime_ns for p in (out / "data").iterdir()} == stamps


def test_the_local_corpus_is_the_same_every_time(local_run, tmp_path):
    out, _, _ = local_run
    corpus = next((out / "data").glob("local-pydoc-*.jsonl"))
    records = [json.loads(line) for line in corpus.read_text().splitlines()]
    modules = [r["module"] for r in records]
    assert "json" in modules and "json.decoder" in modules
    assert not any(".test" in m for m in modules)
    assert next(r["text"] for r in records if r["module"] == "json").startswith("JSON (JavaScript")

    # Built again from one package in other processes with other hash seeds,
    # to keep the test quick: the same bytes, and the same as in the full corpus.
    package = pathlib.Path(email.__file__).parent
    builds = []
    for seed in ("1", "2"):
        target = tmp_path / seed
        target.mkdir()
        code = ("import sys, pathlib\n"
                "from llm_training.data.local_corpus import build_local_corpus\n"
                "build_local_corpus(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))")
        subprocess.run([sys.executable, "-c", code, str(target), str(package)],
                       check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        builds.append(next(target.glob("*.jsonl")).read_bytes())
    assert builds[0] == builds[1]
    subset = {json.loads(line)["text"] for line in builds[0].decode().splitlines()}
    assert len(subset) > 10 and subset <= {r["text"] for r in records}


# --- other corpora and bad input ------------------------------------------------

def test_a_corpus_file_with_given_tokenizer_files(local_run, tmp_path, capsys):
    _, outputs, _ = local_run
    given = LINE.fullmatch(outputs[0].splitlines()[-1]).groupdict()
    corpus = tmp_path / "my notes.txt"
    corpus.write_text("First document.\nStill first.\n\nSecond document.\n")
    code, line, _ = run(capsys, "--corpus", corpus, "--out-dir", tmp_path / "data",
                        "--vocab-file", given["vocab_file"], "--merge-file", given["merge_file"])
    assert code == 0
    assert (line["name"], line["tokenizer"], line["documents"]) == ("my-notes", "gpt2", "2")


@pytest.mark.parametrize("argv, message", [
    (["--corpus", "{tmp}/missing.jsonl"], r"corpus file \S+/missing\.jsonl does not exist"),
    (["--corpus", "local", "--vocab-file", "{tmp}/v.json"],
     r"give --vocab-file and --merge-file together; or neither"),
    (["--corpus", "local", "--vocab-file", "{tmp}/v.json", "--merge-file", "{tmp}/m.txt"],
     r"vocab file \S+/v\.json does not exist"),
    (["--corpus", "local", "--vocab-file", "a", "--merge-file", "b", "--vocab-size", "100"],
     r"--vocab-size is for a locally trained BPE"),
    (["--corpus", "local", "--vocab-size", "100"], r"--vocab-size 100 is too small"),
])
def test_bad_input_is_one_line_and_a_failed_exit(local_run, tmp_path, capsys, argv, message):
    out, _, _ = local_run
    # The local corpus is reused from local_run, so only the bad part is new.
    argv = [a.format(tmp=tmp_path) for a in argv] + ["--out-dir", out / "data"]
    code, line, err = run(capsys, *argv)
    assert code == 1 and line is None
    assert err.startswith("CARAML ERROR: ") and err.count("\n") == 1
    assert re.search(message, err)


def test_a_path_with_a_space_and_a_semicolon_is_carried_percent_encoded(tmp_path, capsys):
    from llm_training.data.preprocess import Prepared

    odd = tmp_path / "a b;c" / "x_text_document"
    Prepared("x", odd, odd.with_name("v.json"), odd.with_name("m.txt"), 2, 9, "gpt2").emit()
    match = LINE.fullmatch(capsys.readouterr().out.strip())
    assert match, "the data line must stay space-separated key=value pairs"
    assert urllib.parse.unquote(match["prefix"]) == str(odd)
