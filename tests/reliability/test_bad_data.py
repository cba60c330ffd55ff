"""Bad data names itself: an image that does not decode names its file
(also from a DataLoader worker process), through the real image driver."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from caraml.report import BenchmarkInputError
from tests.jube_runs import ROOT


@pytest.fixture
def folder_with_a_bad_image(tmp_path):
    for c in range(2):
        (tmp_path / f"class{c}").mkdir()
        for i in range(4):
            Image.new("RGB", (24, 24), (60 * c, 0, 0)).save(tmp_path / f"class{c}" / f"{i}.jpg")
    good = (tmp_path / "class1" / "0.jpg").read_bytes()
    # a download cut short: the JPEG header and half the data
    (tmp_path / "class1" / "cut short.jpg").write_bytes(good[: len(good) // 2])
    (tmp_path / "class0" / "not an image.jpg").write_bytes(b"<html>404</html>")
    return tmp_path


@pytest.mark.parametrize("workers", ["0", "1"])
def test_an_image_that_does_not_decode_names_its_file(folder_with_a_bad_image, workers):
    proc = subprocess.run(
        [sys.executable, "-m", "image_classification.image_classification_torch",
         "--model", "resnet18", "--image-size", "16", "--num-classes", "2", "--device", "cpu",
         "--data", str(folder_with_a_bad_image), "--global-batch-size", "10",
         "--train-iters", "3", "--warmup-iters", "1", "--num-workers", workers,
         "--energy-methods", "none"],
        cwd=ROOT, text=True, capture_output=True, timeout=600)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("CARAML ERROR: ")]
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr[-3000:]
    assert "cannot be decoded" in errors[0] and "remove or replace it" in errors[0]
    assert ("not an image.jpg" in errors[0]) or ("cut short.jpg" in errors[0])


def _dataset(tmp_path, ids_high: int):
    from llm_training.data import indexed

    prefix = tmp_path / "corpus_text_document"
    documents = [[(i * 37 + j) % ids_high for j in range(50)] for i in range(40)]
    indexed.write(documents, prefix, vocab_size=60000)
    return indexed, prefix


def test_random_bytes_in_a_bin_are_called_damaged_not_another_vocabulary(tmp_path):
    indexed, prefix = _dataset(tmp_path, ids_high=90)
    bin_path = indexed.paths(prefix)[0]
    # the same size, so only the token ids can tell: random uint16 values
    bin_path.write_bytes(np.random.default_rng(0).bytes(bin_path.stat().st_size))
    with pytest.raises(BenchmarkInputError, match="the file is damaged; prepare the data again"):
        indexed.check(prefix, vocab_size=100)


def test_text_of_another_vocabulary_is_called_so(tmp_path):
    indexed, prefix = _dataset(tmp_path, ids_high=5000)
    with pytest.raises(BenchmarkInputError, match="tokenised with another vocabulary$"):
        indexed.check(prefix, vocab_size=100)
    # and no temporary file of the writer is left
    assert [p.name for p in tmp_path.iterdir()] != [] and not list(tmp_path.glob("*tmp*"))
