"""The job a time- or energy-to-solution is computed for: how much work
(tokens, images or samples) one real training takes. Measured rates times this work
are extrapolations, and every table that shows them says so."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

# Parameters per model size with GPT-2's vocabulary padded as Megatron pads it
# (cpu-small: the local 8192-token BPE of the CPU runs), as
# llm_training.flops.parameter_count gives them; a row's own Params column
# wins. caraml may not import the benchmarks, so the counts are written
# here and tests/compare checks them against that function.
PARAMETERS = {
    "cpu-small": 5_256_704,
    "117M": 123_689_472,
    "800M": 908_759_040,
    "13B": 12_843_796_480,
    "175B": 174_590_681_088,
}
IMAGENET_TRAIN_IMAGES = 1_281_167
# The operator driver's epoch on synthetic fields (operator_benchmark/config.py,
# SYNTHETIC_EPOCH; tests/compare checks the two agree)
OPERATOR_SAMPLES_PER_EPOCH = 1024
# The configurations that stand for the job, as the CARAML paper ran it: the
# 800M GPT at sequence length 2048, ResNet-50 on 224 px images; and of the
# operator benchmark, the FNO on upstream's 3D convection problem (5 fields
# on 64x64x32), the heaviest of upstream's shapes, in any compile mode (None:
# the operator rows have no size). A smoke configuration (resnet18 at 64 px,
# cpu-small, a CPU-sized problem) says nothing about the time a real
# training takes, so it gets no time or energy to solution.
REPRESENTATIVE = {"llm": ("800M", 2048.0), "image": ("resnet50", 224.0),
                  "operator": ("FNO rbc3d", None)}


@dataclass(frozen=True)
class Jobs:
    tokens_per_parameter: float = 20.0  # compute-optimal training (Hoffmann et al. 2022)
    llm_tokens: float | None = None  # a fixed token count instead of tokens per parameter
    epochs: float = 90.0
    images_per_epoch: int = IMAGENET_TRAIN_IMAGES
    # an FNO's training: hundreds of epochs over a data set of about a thousand samples
    operator_epochs: float = 500.0
    operator_samples_per_epoch: int = OPERATOR_SAMPLES_PER_EPOCH

    def representative(self, row: pd.Series) -> bool:
        """Whether the row's model and size are the job's (REPRESENTATIVE);
        a fixed --llm-tokens job takes any LLM model."""
        if row["benchmark"] == "llm" and self.llm_tokens is not None:
            return True
        if row["benchmark"] not in REPRESENTATIVE:
            return False
        model, size = REPRESENTATIVE[row["benchmark"]]
        return row["model"] == model and (size is None or row["size"] == size)

    def work(self, row: pd.Series) -> tuple[float, str]:
        """Units of work (tokens, images or samples) of the job for this
        row's configuration, and how it was chosen."""
        if row["benchmark"] == "image":
            return (self.epochs * self.images_per_epoch,
                    f"{self.epochs:g} epochs of {self.images_per_epoch:,} images".replace(",", " "))
        if row["benchmark"] == "operator":
            return (self.operator_epochs * self.operator_samples_per_epoch,
                    f"{self.operator_epochs:g} epochs of {self.operator_samples_per_epoch:,} samples"
                    .replace(",", " "))
        if self.llm_tokens is not None:
            return self.llm_tokens, f"{self.llm_tokens:.3g} tokens"
        params, origin = row["params"], "the row's Params"
        if pd.isna(params):
            params, origin = PARAMETERS.get(row["model"], math.nan), f"the {row['model']} size's count"
        if pd.isna(params):
            return math.nan, f"n/a: no parameter count for model {row['model']}"
        return (self.tokens_per_parameter * params,
                f"{self.tokens_per_parameter:g} tokens per parameter x {params / 1e6:.1f}M parameters "
                f"({origin})")
