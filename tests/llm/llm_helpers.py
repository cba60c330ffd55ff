"""What the LLM tests share: paths, a tiny run's flags, and a parser for
the driver's CARAML lines."""

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

# A GPT small enough that an iteration takes milliseconds on two CPU cores,
# with synthetic data, no data-loader processes and a log line per iteration.
TINY = ["--model-size", "cpu-small", "--num-layers", "1", "--hidden-size", "32",
        "--num-attention-heads", "2", "--seq-length", "16", "--synthetic", "--vocab-size", "128",
        "--micro-batch-size", "2", "--global-batch-size", "4", "--num-workers", "0",
        "--device", "cpu", "--log-interval", "1"]


def parse_caraml(text: str) -> dict:
    """CARAML lines by scope: `global`, `rank 0`, ... map to their key=value
    pairs, `stop` and `ERROR` to their text."""
    lines = {}
    for m in re.finditer(r"^CARAML ([^:]+): (.*)$", text, re.MULTILINE):
        scope, body = m.groups()
        lines[scope] = body if scope in ("stop", "ERROR") else dict(
            kv.split("=", 1) for kv in body.split())
    return lines
