"""torch.compile's toolchain on a GPU node, checked before the first step:
Triton needs a C compiler (CC, gcc or clang) and Python's headers. The
node's PATH and include directory are the inputs faked here."""

from __future__ import annotations

from pathlib import Path

import pytest

from caraml import compile_toolchain
from caraml.report import BenchmarkInputError


@pytest.fixture
def node(tmp_path):
    """(PATH directory, include directory) of an empty node; tests add to them."""
    bin_dir, include = tmp_path / "bin", tmp_path / "include"
    bin_dir.mkdir()
    include.mkdir()
    return bin_dir, include


def add_program(bin_dir: Path, name: str) -> None:
    exe = bin_dir / name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)


def test_a_node_with_gcc_and_headers_passes(node):
    bin_dir, include = node
    add_program(bin_dir, "gcc")
    (include / "Python.h").write_text("")
    assert compile_toolchain.missing({"PATH": str(bin_dir)}, str(include)) is None
    compile_toolchain.check("x", {"PATH": str(bin_dir)}, str(include))


def test_clang_or_cc_named_by_CC_count_as_compilers(node):
    bin_dir, include = node
    (include / "Python.h").write_text("")
    add_program(bin_dir, "clang")
    assert compile_toolchain.missing({"PATH": str(bin_dir)}, str(include)) is None
    add_program(bin_dir, "icx")
    assert compile_toolchain.missing({"PATH": str(bin_dir), "CC": "icx"}, str(include)) is None
    assert compile_toolchain.missing({"PATH": str(bin_dir), "CC": "nvc"}, str(include)) == \
        "the C compiler CC=nvc is not found"


def test_a_bare_node_gets_one_line_naming_both(node):
    bin_dir, include = node
    with pytest.raises(BenchmarkInputError) as err:
        compile_toolchain.check("the megatron backend (megatron-core's fused kernels)",
                                {"PATH": str(bin_dir)}, str(include))
    message = str(err.value)
    assert "\n" not in message
    assert message == (
        "the megatron backend (megatron-core's fused kernels) compiles kernels with torch.compile "
        "(Triton), which needs a C compiler and Python's headers: no C compiler (CC unset, no gcc "
        f"or clang on PATH); no Python headers ({include / 'Python.h'}); load a compiler module "
        "or install gcc and the python3-dev headers on the node (or in the container)")

