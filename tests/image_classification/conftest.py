from pathlib import Path

import pytest
from PIL import Image

from tests.driver_runs import parse_caraml
from tests.gpu_marks import DEVICE

REPO = Path(__file__).resolve().parents[2]
# A small real run: resnet18 on 32x32 images is seconds per iteration at most
# on two CPU cores; on the GPU where there is one.
TINY_RUN = ["--model", "resnet18", "--image-size", "32", "--num-classes", "10",
            "--device", DEVICE]


@pytest.fixture
def caraml_lines():
    return parse_caraml


@pytest.fixture
def tiny_run() -> list[str]:
    return list(TINY_RUN)


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def folder(tmp_path):
    """An ImageFolder tree: two classes of three small RGB images each, one
    class pure red, the other pure blue."""
    for c, colour in enumerate([(255, 0, 0), (0, 0, 255)]):
        (tmp_path / f"class{c}").mkdir()
        for i in range(3):
            Image.new("RGB", (40, 30), colour).save(tmp_path / f"class{c}" / f"{i}.png")
    return tmp_path
