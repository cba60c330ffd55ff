"""What the fp32 math set-up leaves behind: TF32 only under tf32, and torch's
own queries still answering, Inductor's autotuning included. The flags can
be set without a GPU, so all of it runs on a CPU host."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch._inductor.config
from torch._dynamo.utils import counters
from torch._inductor.cpu_vec_isa import valid_vec_isa_list

from caraml.node import compile_toolchain, precision

CPU = torch.device("cpu")
CUDA = torch.device("cuda", 0)
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


@pytest.fixture(autouse=True)
def restore_fp32_math():
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.mark.parametrize("before", PRECISIONS)
@pytest.mark.parametrize("name", PRECISIONS)
def test_tf32_math_only_under_tf32_and_torch_still_answers(before, name):
    # Every order: a set-up must undo the one before it (cuDNN's own default
    # for convolutions is TF32).
    precision.set_fp32_math(before, CUDA)
    precision.set_fp32_math(name, CUDA)
    tf32 = name == "tf32"
    assert torch.get_float32_matmul_precision() == ("high" if tf32 else "highest")
    # What Inductor reads, and cuDNN's flag, which raises where conv and RNN disagree
    assert torch.backends.cuda.matmul.fp32_precision == ("tf32" if tf32 else "ieee")
    assert torch.backends.cudnn.allow_tf32 is tf32
    assert torch.backends.cuda.matmul.allow_tf32 is tf32


@pytest.mark.parametrize("name", PRECISIONS)
def test_a_cpu_set_up_leaves_the_math_alone(name):
    precision.set_fp32_math("tf32", CUDA)
    precision.set_fp32_math(name, CPU)
    assert torch.get_float32_matmul_precision() == "high"


@pytest.mark.skipif(compile_toolchain.missing() is not None,
                    reason=f"torch.compile cannot build kernels here: {compile_toolchain.missing()}")
@pytest.mark.skipif(not valid_vec_isa_list(),
                    reason="this CPU has no vector ISA Inductor's C++ GEMM template uses, "
                           "so a linear layer has one candidate kernel only")
def test_max_autotune_chooses_between_kernels_after_the_tf32_set_up(tmp_path, monkeypatch):
    # Inductor asks torch.get_float32_matmul_precision() for its autotuning
    # cache key whenever a layer has more than one candidate kernel. On a CPU
    # a frozen linear layer has two (the C++ GEMM template and MKL's).
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # nothing cached: it tunes
    precision.set_fp32_math("tf32", CUDA)
    torch._dynamo.reset()
    counters.clear()
    layer = torch.nn.Linear(64, 64)
    x = torch.randn(32, 64)
    with torch._inductor.config.patch(freezing=True), torch.no_grad():
        out = torch.compile(layer, mode="max-autotune")(x)
        expected = layer(x)
    torch._dynamo.reset()
    assert counters["inductor"]["select_algorithm_autotune"] >= 1
    assert torch.allclose(out, expected, atol=1e-4)


def test_gc200s_precisions_are_the_suites_names_mapped_once_to_graphcores(capsys):
    """GC200's image rows carry the suite's precision (fp16 is Graphcore's
    16.32: fp16 arithmetic on fp32 master weights, as autocast), so they are
    like for like with the GPUs' rows; 16.16 keeps its own name."""
    import xml.etree.ElementTree as ET
    from pathlib import Path

    from caraml.node import options
    assert [options.graphcore_precision(p) for p in ("fp16", "fp32", "16.16")] == ["16.32", "32.32", "16.16"]
    assert options.main(["graphcore", "bf16"]) == 2
    assert "precision bf16 has no Graphcore counterpart on GC200" in capsys.readouterr().err
    script = ET.parse(Path(__file__).parents[2] / "image_classification"
                      / "image_classification_torch_benchmark.xml")
    on_gc200 = [p for p in script.iter("parameter")
                if p.get("name") == "precision" and "GC200" in (p.get("tag") or "")]
    values = {v for p in on_gc200 for v in p.text.split(";")}
    assert values == {"fp16", "fp32", "16.16"}
    assert values - set(options.GRAPHCORE_ONLY) <= set(options.PRECISIONS)
    command = next(p.text for p in script.iter("parameter")
                   if p.get("name") == "job_command" and p.get("tag") == "GC200")
    assert "--precision ${ipu_precision}" in command
