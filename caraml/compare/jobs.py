"""The job a time- or energy-to-solution is computed for: how much work
(tokens, images or samples) one real training takes. Measured rates times this work
are extrapolations, and every table that shows them says so."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from caraml import benchmarks

# Parameters per model size with GPT-2's vocabulary padded as Megatron pads it
# (cpu-small: the local 8192-token BPE of the CPU runs), as
# the LLM benchmark's flops.parameter_count gives them; a row's own Params column
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
# The operator driver's epoch on synthetic fields (the SYNTHETIC_EPOCH of
# its config.py; tests/compare checks the two agree)
OPERATOR_SAMPLES_PER_EPOCH = 1024
# The configuration that stands for each benchmark's job is its entry's
# `representative` (caraml/benchmarks.py). A smoke configuration (resnet18
# at 64 px, cpu-small, a CPU-sized problem) says nothing about the time a
# real training takes, so it gets no time or energy to solution.


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
        """Whether the row's model and size are the job's (its benchmark's
        `representative`); a fixed --llm-tokens job takes any LLM model."""
        entry = benchmarks.find(row["benchmark"])
        if entry is None or entry.representative is None:
            return False
        if entry.job_epochs is None and self.llm_tokens is not None:
            return True
        model, size = entry.representative
        return row["model"] == model and (size is None or row["size"] == size)

    def work(self, row: pd.Series) -> tuple[float, str]:
        """Units of work (tokens, images or samples) of the job for this
        row's configuration, and how it was chosen."""
        entry = benchmarks.get(row["benchmark"])
        if entry.job_epochs is not None:
            epochs, per_epoch = (getattr(self, name) for name in entry.job_epochs)
            return (epochs * per_epoch,
                    f"{epochs:g} epochs of {per_epoch:,} {entry.unit}".replace(",", " "))
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
