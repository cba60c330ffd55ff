"""The data step and the index caches on a disk that fills up (a small
tmpfs): each stage (the corpus, the .bin/.idx, megatron-core's index cache)
names the file and the fix, leaves nothing half-written that a later run
would trust, and succeeds once space is freed. A dataset or cache damaged
after it was made is checked before it is trusted, and made again."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

from caraml.report import BenchmarkInputError
from llm_training.data import indexed
from llm_training.data.datasets import CACHE_VARIABLE
from llm_training.data.prepare import main
from tests.llm.test_data_datasets import build, make_documents
from tests.reliability.small_disk import fill, small_disk

VOCAB = 8192


def prepare(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def corpus(tmp_path) -> Path:
    """Text of some 100,000 tokens of a 300-token BPE: its .bin takes ~200 KB."""
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "energy", "token", "node", "batch"]
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join(" ".join(rng.choice(words, 60)) for _ in range(600)) + "\n")
    return path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name or p.name.endswith(".part"))


def test_a_full_disk_at_the_bin_idx_stage_leaves_nothing_and_a_rerun_succeeds(corpus, tmp_path):
    with small_disk(tmp_path / "disk", "1m") as disk:
        data = disk / "data"
        data.mkdir()
        # room for the tokenizer files, not for the token ids
        filler = fill(disk, leave=64 * 1024)
        code, out, err = prepare("--corpus", corpus, "--out-dir", data, "--vocab-size", 300)
        assert code == 1 and "CARAML data:" not in out
        assert "No space left on device" in err and f"free space in {data}" in err, err
        assert leftovers(data) == [] and not list(data.glob("*.bin")) and not list(data.glob("*.idx"))
        assert not list(data.glob("*_text_document.json"))  # no record of a dataset that is not there
        filler.unlink()
        code, out, err = prepare("--corpus", corpus, "--out-dir", data, "--vocab-size", 300)
        assert code == 0, err
        prefix = next(data.glob("*_text_document.bin")).with_suffix("")
        indexed.check(prefix)


def test_a_full_disk_at_the_corpus_stage_leaves_no_partial_corpus(tmp_path):
    with small_disk(tmp_path / "disk", "1m") as disk:
        fill(disk, leave=8 * 1024)
        code, _, err = prepare("--corpus", "local", "--out-dir", disk / "data")
        assert code == 1 and "No space left on device" in err, err
        assert leftovers(disk / "data") == [] and not list((disk / "data").glob("*.jsonl"))


def test_a_damaged_bin_is_checked_and_made_again_by_the_next_data_step(corpus, tmp_path):
    data = tmp_path / "data"
    assert prepare("--corpus", corpus, "--out-dir", data, "--vocab-size", 300)[0] == 0
    bin_path = next(data.glob("*_text_document.bin"))
    whole = bin_path.stat().st_size
    with bin_path.open("r+b") as f:
        f.truncate(whole // 2)
    code, out, err = prepare("--corpus", corpus, "--out-dir", data, "--vocab-size", 300)
    assert code == 0 and "CARAML data:" in out, err
    # (a small corpus also warns that its vocabulary came out smaller than asked)
    [warning] = [ln for ln in out.splitlines() if ln.startswith(f"CARAML warning: {bin_path}")]
    assert f"{bin_path} has {whole // 2} bytes" in warning and "it is made again" in warning
    assert bin_path.stat().st_size == whole
    indexed.check(bin_path.with_suffix(""))


@pytest.fixture
def data(tmp_path) -> str:
    prefix = tmp_path / "corpus_text_document"
    indexed.write(make_documents(), prefix, VOCAB)
    return str(prefix)


def test_a_full_disk_while_the_index_cache_is_built_names_the_variable_and_keeps_nothing(
        data, tmp_path):
    with small_disk(tmp_path / "disk", "1m") as disk:
        cache = disk / "cache"
        filler = fill(disk, leave=8 * 1024)
        with pytest.raises(BenchmarkInputError) as err:
            build(data, path_to_cache=str(cache), num_train_samples=20_000)
        assert f"could not build its index cache in {cache}" in str(err.value)
        assert CACHE_VARIABLE in str(err.value) and "path_to_cache" not in str(err.value)
        # nothing a later run would trust: no index file that does not load
        assert not list(cache.glob("*.npy")) if cache.exists() else True
        filler.unlink()
        train, _ = build(data, path_to_cache=str(cache), num_train_samples=20_000)
        assert len(train) == 20_000 and train[19_999]["tokens"].shape[0] > 0


def test_a_truncated_index_cache_is_removed_and_built_again(data, tmp_path, capsys):
    cache = tmp_path / "cache"
    first, _ = build(data, path_to_cache=str(cache))
    shuffle = next(cache.glob("*-GPTDataset-train-shuffle_index.npy"))
    whole = shuffle.stat().st_size
    with shuffle.open("r+b") as f:
        f.truncate(whole - 16)
    again, _ = build(data, path_to_cache=str(cache))  # was: ValueError: mmap length ...
    assert shuffle.stat().st_size == whole
    assert "removed the damaged index cache" in capsys.readouterr().err
    assert all(np.array_equal(first[i]["tokens"], again[i]["tokens"]) for i in range(len(first)))


def test_the_cache_folder_can_be_set_through_the_environment(data, tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "elsewhere"))
    build(data)
    assert list((tmp_path / "elsewhere").glob("*-GPTDataset-train-sample_index.npy"))



def test_a_damaged_dataset_found_in_the_job_says_how_it_is_made_again(data):
    bin_path = Path(data + ".bin")
    with bin_path.open("r+b") as f:
        f.truncate(bin_path.stat().st_size - 2)
    with pytest.raises(BenchmarkInputError, match=r"corpus_text_document\.bin has \d+ bytes .*; "
                                                  r"data the suite's data step made is checked "
                                                  r"and made again when the benchmark runs again"):
        build(data)
