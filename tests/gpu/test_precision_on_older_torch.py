"""The precision set-up against the torch versions of the suite's GPU
containers, on the CPU: torch 2.6 (NGC image of containers/nvidia_x86.def)
and 2.8 (nvidia_arm64.def) have only the `allow_tf32` flags and raise
AttributeError on the `fp32_precision` names of torch 2.9 on. The fakes
stand in for `torch.backends` as those versions have it; and for the
device properties of AMD GPUs with and without TF32."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from caraml.node import precision
from caraml.report import BenchmarkInputError

CUDA = torch.device("cuda", 0)


class _LegacyMatmul:
    """torch 2.6's torch.backends.cuda.matmul: allow_tf32 only, and an
    AttributeError for any other name."""

    def __init__(self):
        self.__dict__["allow_tf32"] = None

    def __getattr__(self, name):
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name, value):
        if name != "allow_tf32":
            raise AttributeError(f"Unknown attribute {name}")
        self.__dict__[name] = value


def legacy_backends():
    # torch.backends.cudnn of torch 2.6/2.8 has allow_tf32 and no .conv or .rnn
    return SimpleNamespace(cuda=SimpleNamespace(matmul=_LegacyMatmul()),
                           cudnn=SimpleNamespace(allow_tf32=None))


@pytest.mark.parametrize("name, tf32", [("tf32", True), ("fp32", False), ("bf16", False),
                                        ("fp16", False)])
def test_older_torch_gets_its_allow_tf32_flags(name, tf32):
    backends = legacy_backends()
    precision.set_fp32_math(name, CUDA, backends)
    assert backends.cuda.matmul.allow_tf32 is tf32
    assert backends.cudnn.allow_tf32 is tf32


def test_the_fake_raises_as_torch_2_6_does_on_the_new_names():
    with pytest.raises(AttributeError, match="Unknown attribute fp32_precision"):
        legacy_backends().cuda.matmul.fp32_precision = "ieee"


@pytest.fixture
def rocm_device(monkeypatch):
    """A ROCm torch whose device 0 is of the architecture the test sets."""
    def set_arch(arch: str, name: str):
        monkeypatch.setattr(torch.version, "hip", "6.4.0", raising=False)
        monkeypatch.setattr(torch.cuda, "get_device_properties",
                            lambda device: SimpleNamespace(gcnArchName=arch))
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: name)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: True)
    return set_arch


def test_tf32_on_an_mi250_is_refused_rather_than_run_as_fp32(rocm_device):
    rocm_device("gfx90a:sramecc+:xnack-", "AMD Instinct MI250X / MI250")
    with pytest.raises(BenchmarkInputError,
                       match=r"precision tf32: AMD Instinct MI250X / MI250 \(gfx90a\) has no "
                             r"TF32 .*use fp32"):
        precision.check("tf32", CUDA)
    precision.check("fp32", CUDA)  # fp32 and bf16 stay allowed
    precision.check("bf16", CUDA)


def test_tf32_on_an_mi300_is_allowed_where_hipblaslt_may_use_it(rocm_device, monkeypatch):
    rocm_device("gfx942:sramecc+:xnack-", "AMD Instinct MI300A")
    monkeypatch.setenv("HIPBLASLT_ALLOW_TF32", "1")
    precision.check("tf32", CUDA)


@pytest.mark.parametrize("value", [None, "0"])
def test_tf32_on_an_mi300_without_hipblaslts_switch_is_refused(rocm_device, monkeypatch, value):
    """ROCm's torch would run IEEE fp32: the row would be fp32 under a tf32 label."""
    rocm_device("gfx942:sramecc+:xnack-", "AMD Instinct MI300X")
    if value is None:
        monkeypatch.delenv("HIPBLASLT_ALLOW_TF32", raising=False)
    else:
        monkeypatch.setenv("HIPBLASLT_ALLOW_TF32", value)
    with pytest.raises(BenchmarkInputError,
                       match=r"precision tf32 on ROCm needs HIPBLASLT_ALLOW_TF32=1 .*IEEE fp32"):
        precision.check("tf32", CUDA)
    precision.check("bf16", CUDA)
