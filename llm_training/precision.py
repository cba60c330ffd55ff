"""The torch dtype behind each --precision name."""

from __future__ import annotations

import torch

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
