"""What the LLM tests share: paths and a tiny run's flags."""

import sys
from pathlib import Path

from tests.gpu_marks import DEVICE

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

# A GPT small enough that an iteration takes milliseconds on two CPU cores,
# with synthetic data, no data-loader processes and a log line per iteration;
# on the GPU where there is one.
TINY = ["--model-size", "cpu-small", "--num-layers", "1", "--hidden-size", "32",
        "--num-attention-heads", "2", "--seq-length", "16", "--synthetic", "--vocab-size", "128",
        "--micro-batch-size", "2", "--global-batch-size", "4", "--num-workers", "0",
        "--device", DEVICE, "--log-interval", "1"]
