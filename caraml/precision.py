"""What each --precision means on a device, for every benchmark: the
dtype, the autocast dtype, whether the loss needs a gradient scaler, and
whether fp32 math may use TF32.

fp32 is IEEE fp32 everywhere: cuDNN would otherwise use TF32 for
convolutions by default, and a table row labelled fp32 must not be TF32.
tf32 and fp16 exist only on GPUs and are rejected on a CPU rather than
quietly run as fp32."""

from __future__ import annotations

from contextlib import AbstractContextManager

import torch

from caraml.report import BenchmarkInputError

_AUTOCAST_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
# The dtype of the numbers a precision computes with (TF32 is an fp32 mode)
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, **_AUTOCAST_DTYPES}


def check(precision: str, device: torch.device) -> None:
    if device.type == "cuda":
        if precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            raise BenchmarkInputError(
                f"precision bf16: {torch.cuda.get_device_name(device)} has no native bf16")
        return
    if precision == "tf32":
        raise BenchmarkInputError(
            f"precision tf32 needs a GPU (TensorFloat-32 is a tensor-core mode); "
            f"on {device.type} use fp32 or bf16")
    if precision == "fp16":
        raise BenchmarkInputError(
            f"precision fp16 needs a GPU (fp16 autocast with a gradient scaler); "
            f"on {device.type} use bf16 or fp32")


def set_fp32_math(precision: str, device: torch.device) -> None:
    """Lets fp32 matmuls and convolutions use TF32 only under tf32. Under
    fp16/bf16 the ops that autocast keeps in fp32 stay IEEE as well."""
    if device.type != "cuda":
        return
    mode = "tf32" if precision == "tf32" else "ieee"
    torch.backends.cuda.matmul.fp32_precision = mode
    torch.backends.cudnn.conv.fp32_precision = mode
    torch.backends.cudnn.rnn.fp32_precision = mode


def autocast(precision: str, device: torch.device) -> AbstractContextManager:
    dtype = _AUTOCAST_DTYPES.get(precision)
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def grad_scaler(precision: str, device: torch.device, **options) -> torch.amp.GradScaler:
    # fp16's narrow range lets small gradients underflow without loss scaling;
    # bf16 has fp32's range. A disabled scaler passes everything through.
    return torch.amp.GradScaler(device.type, enabled=precision == "fp16", **options)
