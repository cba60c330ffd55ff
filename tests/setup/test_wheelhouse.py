"""aux/wheelhouse.py fetches the lock's files for the nodes' architecture
only, each checked against the lock's hashes: an aarch64 (GH200)
wheelhouse never falls back to x86_64 wheels, and the lock's markers are
judged for the node, not for the machine that fills the wheelhouse."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.setup.wheels import lock_entry, wheel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "aux"))
import wheelhouse


def test_the_tags_stay_on_the_nodes_architecture():
    arm = wheelhouse.platform_tags("manylinux_2_28_aarch64")
    assert arm[:2] == ["manylinux_2_28_aarch64", "manylinux_2_27_aarch64"]
    assert arm[-2:] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]
    assert all(tag.endswith("_aarch64") for tag in arm) and len(arm) == 13
    x86 = wheelhouse.platform_tags("manylinux_2_28_x86_64")
    # the tags of the locked torch's CUDA libraries (nvidia-cuda-cupti: 2_25, nvtx: 2_5)
    assert {"manylinux_2_25_x86_64", "manylinux_2_5_x86_64", "manylinux2010_x86_64"} <= set(x86)
    assert x86[-1] == "manylinux1_x86_64" and all(tag.endswith("_x86_64") for tag in x86)
    with pytest.raises(SystemExit, match="--platform linux_aarch64: expected a manylinux tag"):
        wheelhouse.platform_tags("linux_aarch64")


def _offer(folder: Path, arch: str, version: str = "1.0") -> Path:
    """fastmath as a compiled wheel for one architecture"""
    plain = wheel(folder, "fastmath", version)
    return plain.rename(folder / f"fastmath-{version}-cp311-cp311-manylinux_2_17_{arch}.whl")


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


def _lines(lock: Path, machine: str, with_torch: bool = False) -> list[str]:
    return wheelhouse.selected("3.11", machine, with_torch, [lock])


def test_an_aarch64_wheelhouse_refuses_an_x86_64_wheel(index, tmp_path):
    built = tmp_path / "built"
    built.mkdir()
    lock = tmp_path / "main.txt"
    lock.write_text(lock_entry("fastmath", "1.0", [_offer(built, "x86_64"), _offer(built, "aarch64")]))
    _offer(index, "x86_64")
    out = tmp_path / "out"
    assert not wheelhouse.download(_lines(lock, "aarch64"), out, _target("manylinux_2_28_aarch64"))
    assert not list(out.glob("*.whl"))


def test_an_aarch64_wheelhouse_takes_the_locked_aarch64_wheel(index, tmp_path):
    lock = tmp_path / "main.txt"
    lock.write_text(lock_entry("fastmath", "1.0", [_offer(index, "x86_64"), _offer(index, "aarch64")]))
    _offer(index, "aarch64", "99.0")
    out = tmp_path / "out"
    assert wheelhouse.download(_lines(lock, "aarch64"), out, _target("manylinux_2_28_aarch64"))
    assert [p.name for p in out.glob("*.whl")] == ["fastmath-1.0-cp311-cp311-manylinux_2_17_aarch64.whl"]


def test_a_file_that_does_not_match_the_locks_hash_is_refused(index, tmp_path, capsys):
    built = tmp_path / "built"
    built.mkdir()
    lock = tmp_path / "main.txt"
    lock.write_text(lock_entry("pure", "1.0", [wheel(built, "pure", "1.0")]))
    wheel(index, "pure", "1.0", ["other"])  # same name and version, other bytes
    out = tmp_path / "out"
    assert not wheelhouse.download(_lines(lock, "x86_64"), out, _target("manylinux_2_28_x86_64"))
    assert not list(out.glob("*.whl"))
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "DO NOT MATCH THE HASHES" in said[0] and "pure==1.0" in said[0], said


def test_the_lines_are_judged_for_the_node_and_the_framework_stays_out(tmp_path):
    built = tmp_path / "built"
    built.mkdir()
    one = wheel(built, "one", "1.0")
    lock = tmp_path / "main.txt"
    lock.write_text(lock_entry("armonly", "1.0", [one], marker="platform_machine == 'aarch64'")
                    + lock_entry("cudalib", "13.0", [one], via=("torch",))
                    + lock_entry("dropped", "1.0", [one], marker="sys_platform == 'never'")
                    + lock_entry("megatron-core", "0.16.1", [one])
                    + lock_entry("new-python", "1.0", [one], marker="python_full_version >= '3.12'")
                    + lock_entry("torch", "2.13.0", [one], via=("megatron-core",)))
    names = [line.split("==")[0] for line in _lines(lock, "aarch64")]
    assert names == ["armonly", "megatron-core"]
    assert [line.split("==")[0] for line in _lines(lock, "x86_64", with_torch=True)] == [
        "cudalib", "megatron-core", "torch"]
    assert all("--hash=sha256:" in line for line in _lines(lock, "aarch64"))
    # judged here, so pip (which would judge them by its own Python) sees no marker
    assert not any(";" in line for line in _lines(lock, "aarch64"))


def test_a_line_for_another_python_than_pips_own_is_downloaded(index, tmp_path):
    """pip download --python-version 3.12 would skip a line marked for
    Python >= 3.12 when it runs on 3.11 (and the reverse)"""
    python, marker = (("3.12", "python_full_version >= '3.12'") if sys.version_info < (3, 12)
                      else ("3.11", "python_full_version < '3.12'"))
    lock = tmp_path / "main.txt"
    lock.write_text(lock_entry("newpy", "1.0", [wheel(index, "newpy", "1.0")], marker=marker))
    out = tmp_path / "out"
    lines = wheelhouse.selected(python, "x86_64", False, [lock])
    target = ["--python-version", python, "--implementation", "cp", "--platform", "manylinux_2_28_x86_64"]
    assert wheelhouse.download(lines, out, target)
    assert [p.name for p in out.glob("*.whl")] == ["newpy-1.0-py3-none-any.whl"]


def test_a_nodes_wheelhouse_holds_what_it_lacks_and_the_lock_where_its_version_may_not_do(
        index, tmp_path, monkeypatch, capsys):
    """--node-packages: the node's packages stay out, except where a wheel
    asks for a version the node's is not, or the node's is unknown"""
    built = tmp_path / "built"
    built.mkdir()
    offered = {
        "app": wheel(index, "app", "1.0", ["lib>=2", "util>=1", "plain", "core>=1"]),
        "lib": wheel(index, "lib", "2.0"), "util": wheel(index, "util", "1.5"),
        "plain": wheel(index, "plain", "1.0"), "core": wheel(index, "core", "1.2"),
    }
    lock = tmp_path / "main.txt"
    lock.write_text("".join(lock_entry(name, path.name.split("-")[1], [path])
                            for name, path in offered.items()))
    monkeypatch.setattr(wheelhouse, "LAYERS", [type("Layer", (), {"path": lock})])
    node_file = tmp_path / "node.txt"
    node_file.write_text("lib==1.0\nutil==3.0\nplain==0.1\ncore\n")
    node = wheelhouse.read_node_packages(node_file)
    out = tmp_path / "out"
    assert wheelhouse.fill(out, "3.11", "manylinux_2_28_x86_64", False, node)
    assert sorted(p.name.split("-")[0] for p in out.glob("*.whl")) == ["app", "core", "lib"]
    assert "the lock's core, lib as well" in capsys.readouterr().out


def test_a_node_package_list_that_cannot_be_read_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"--node-packages .*missing.txt: cannot be read"):
        wheelhouse.read_node_packages(tmp_path / "missing.txt")
