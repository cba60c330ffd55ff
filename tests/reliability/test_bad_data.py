"""Bad data names itself: an image that does not decode names its file
(also from a DataLoader worker process), through the real image driver."""

from __future__ import annotations

import subprocess
import sys

import pytest
from PIL import Image

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
         "--iterations", "3", "--warmup-iterations", "1", "--num-workers", workers,
         "--energy-methods", "none"],
        cwd=ROOT, text=True, capture_output=True, timeout=600)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("CARAML ERROR: ")]
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr[-3000:]
    assert "cannot be decoded" in errors[0] and "remove or replace it" in errors[0]
    assert ("not an image.jpg" in errors[0]) or ("cut short.jpg" in errors[0])
