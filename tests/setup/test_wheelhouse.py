"""aux/wheelhouse.py fetches wheels for the nodes' architecture only: an
aarch64 (GH200) wheelhouse never falls back to x86_64 wheels."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from wheels import wheel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "aux"))
import wheelhouse  # noqa: E402


def test_the_tags_stay_on_the_nodes_architecture():
    assert wheelhouse.platform_tags("manylinux_2_28_aarch64") == [
        "manylinux_2_28_aarch64", "manylinux_2_27_aarch64", "manylinux_2_17_aarch64",
        "manylinux2014_aarch64"]
    assert wheelhouse.platform_tags("manylinux_2_28_x86_64")[-1] == "manylinux1_x86_64"
    with pytest.raises(SystemExit, match="--platform linux_aarch64: expected a manylinux tag"):
        wheelhouse.platform_tags("linux_aarch64")


def _offer(folder: Path, arch: str) -> None:
    """fastmath 1.0 as a compiled wheel for one architecture"""
    plain = wheel(folder, "fastmath", "1.0")
    plain.rename(folder / f"fastmath-1.0-cp311-cp311-manylinux_2_17_{arch}.whl")


@pytest.fixture
def index(tmp_path, monkeypatch):
    folder = tmp_path / "index"
    folder.mkdir()
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    return folder


def _target(platform: str) -> list[str]:
    target = ["--python-version", "3.11", "--implementation", "cp"]
    for tag in wheelhouse.platform_tags(platform):
        target += ["--platform", tag]
    return target


def test_an_aarch64_wheelhouse_refuses_an_x86_64_wheel(index, tmp_path):
    _offer(index, "x86_64")
    out = tmp_path / "out"
    assert not wheelhouse.download("fastmath", out, _target("manylinux_2_28_aarch64"), deps=False)
    assert not list(out.glob("*.whl"))


def test_an_aarch64_wheelhouse_takes_the_aarch64_wheel(index, tmp_path):
    _offer(index, "x86_64")
    _offer(index, "aarch64")
    out = tmp_path / "out"
    assert wheelhouse.download("fastmath", out, _target("manylinux_2_28_aarch64"), deps=False)
    assert [p.name for p in out.glob("*.whl")] == ["fastmath-1.0-cp311-cp311-manylinux_2_17_aarch64.whl"]


def test_the_wheelhouse_takes_the_locked_version(index, tmp_path):
    locked = next(line.split("==")[1] for line in wheelhouse.CONSTRAINTS.read_text().splitlines()
                  if line.lower().startswith("pyyaml=="))
    for version in (locked, "99.0"):
        wheel(index, "PyYAML", version)
    out = tmp_path / "out"
    assert wheelhouse.download("pyyaml>=6", out, _target("manylinux_2_28_x86_64"), deps=False)
    assert [p.name for p in out.glob("*.whl")] == [f"PyYAML-{locked}-py3-none-any.whl"]
