"""torch.compile's toolchain on a GPU node, checked before the first step
on every path that compiles (the image and operator drivers' --compile,
the torch LLM backend's): Triton needs a C compiler (CC, gcc or clang) and
Python's headers. The node's PATH and include directory are the inputs
faked here, and the GPU a device name that nothing touches."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from caraml.node import compile_toolchain, data_parallel
from caraml.report import BenchmarkInputError
from image_classification import config as image_config
from image_classification import image_classification_torch
from llm_training import arguments as llm_arguments
from llm_training.torch_backend import TorchBackend
from operator_benchmark import config as operator_config
from operator_benchmark import fno_training


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



@pytest.fixture
def bare_node(node, monkeypatch):
    """This process on a node without a C compiler or Python's headers."""
    bin_dir, include = node
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(compile_toolchain, "python_include_dir", lambda: str(include))


GPU = SimpleNamespace(world_size=1, rank=0, device=torch.device("cuda", 0))
CPU = SimpleNamespace(world_size=1, rank=0, device=torch.device("cpu"))


def test_the_image_drivers_compile_is_checked_before_the_first_step(bare_node):
    args = image_config.parse(["--compile", "--warmup-iters", "1", "--precision", "fp32",
                               "--global-batch-size", "8"])
    with pytest.raises(BenchmarkInputError, match=r"^--compile compiles kernels .*no C compiler"):
        data_parallel.placement(args, GPU, image_classification_torch.compiling(args))
    # Triton is the GPU's
    assert data_parallel.placement(args, CPU, image_classification_torch.compiling(args)) == 8
    eager = image_config.parse(["--precision", "fp32", "--global-batch-size", "8"])
    assert data_parallel.placement(eager, GPU, image_classification_torch.compiling(eager)) == 8


def test_the_operator_drivers_compile_is_checked_before_the_first_step(bare_node):
    args = operator_config.parse(["--compile", "default", "--warmup-iters", "1",
                                  "--global-batch-size", "4"])
    with pytest.raises(BenchmarkInputError, match=r"^--compile default compiles kernels"):
        data_parallel.placement(args, GPU, fno_training.compiling(args))


def test_the_torch_llm_backends_compile_is_checked_before_the_model_is_built(bare_node):
    args = llm_arguments.parse(["--model-size", "cpu-small", "--backend", "torch", "--compile",
                                "--synthetic", "--train-iters", "2", "--warmup-iters", "1",
                                "--energy-methods", "none"])
    layout = llm_arguments.resolve_layout(args, world_size=1)
    gpt = llm_arguments.gpt_config(args, args.vocab_size)
    # no GPU here: the check must come before anything touches the device
    with pytest.raises(BenchmarkInputError,
                       match=r"^--compile \(the torch backend\) compiles kernels"):
        TorchBackend(gpt, args, layout, GPU)
