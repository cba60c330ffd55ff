"""What each --precision means on a device, for every benchmark: the
dtype, the autocast dtype, whether the loss needs a gradient scaler, and
whether fp32 math may use TF32.

fp32 is IEEE fp32 everywhere: cuDNN would otherwise use TF32 for
convolutions by default, and a table row labelled fp32 must not be TF32.
tf32 and fp16 exist only on GPUs and are rejected on a CPU rather than
quietly run as fp32; so is tf32 on an AMD GPU without TF32 (MI250 and
older: ROCm runs it as IEEE fp32, and the row would be an fp32 row under
a tf32 label), and on one with TF32 where HIPBLASLT_ALLOW_TF32=1 is not
in the environment, without which ROCm's torch does the same
(caraml/rocm_tf32.py; the job script exports it)."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from types import ModuleType
from typing import Any

import torch

from caraml import rocm_tf32
from caraml.report import BenchmarkInputError

_AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
# The dtype of the numbers a precision computes with (TF32 is an fp32 mode)
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, **_AUTOCAST_DTYPES}
# The AMD architectures with TF32 (xf32) tensor-core math: CDNA3 (MI300).
_ROCM_TF32_ARCHS = ("gfx940", "gfx941", "gfx942")


def check(precision: str, device: torch.device) -> None:
    if device.type == "cuda":
        if precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            raise BenchmarkInputError(
                f"precision bf16: {torch.cuda.get_device_name(device)} has no native bf16")
        if precision == "tf32" and torch.version.hip is not None:
            arch = torch.cuda.get_device_properties(device).gcnArchName.split(":")[0]
            if arch not in _ROCM_TF32_ARCHS:
                raise BenchmarkInputError(
                    f"precision tf32: {torch.cuda.get_device_name(device)} ({arch}) has no "
                    f"TF32 math and would run IEEE fp32 under a tf32 label; use fp32")
            if not rocm_tf32.enabled(os.environ):
                raise BenchmarkInputError(
                    f"precision tf32 on ROCm needs {rocm_tf32.ENV}=1 in the environment "
                    f"(the suite's job script exports it for a tf32 job); without it ROCm "
                    f"runs IEEE fp32 under a tf32 label")
        return
    if precision == "tf32":
        raise BenchmarkInputError(
            f"precision tf32 needs a GPU (TensorFloat-32 is a tensor-core mode); "
            f"on {device.type} use fp32 or bf16")
    if precision == "fp16":
        raise BenchmarkInputError(
            f"precision fp16 needs a GPU (fp16 autocast with a gradient scaler); "
            f"on {device.type} use bf16 or fp32")


def set_fp32_math(precision: str, device: torch.device,
                  backends: ModuleType = torch.backends) -> None:
    """Lets fp32 matmuls and convolutions use TF32 only under tf32. Under
    fp16/bf16 the ops that autocast keeps in fp32 stay IEEE as well.

    The `allow_tf32` flags, on every torch version: the suite's NVIDIA
    containers ship torch 2.6 and 2.8, which have only these. torch 2.9
    brought the `fp32_precision` settings, but a TF32 set through them
    leaves torch's own `torch.get_float32_matmul_precision()` raising
    ("mix of the legacy and new APIs", torch 2.9 to 2.13 at least), and
    Inductor asks it whenever it autotunes a layer with more than one
    candidate kernel. The flags keep both APIs' views in step: the new
    names read back `tf32` or `ieee`. Setting them needs no GPU."""
    if device.type != "cuda":
        return
    tf32 = precision == "tf32"
    backends.cuda.matmul.allow_tf32 = tf32
    backends.cudnn.allow_tf32 = tf32  # convolutions and RNNs alike


def autocast(precision: str, device: torch.device) -> AbstractContextManager:
    dtype = _AUTOCAST_DTYPES.get(precision)
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def grad_scaler(precision: str, device: torch.device, **options: Any) -> torch.amp.GradScaler:
    # fp16's narrow range lets small gradients underflow without loss scaling;
    # bf16 has fp32's range. A disabled scaler passes everything through.
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16", **options)
