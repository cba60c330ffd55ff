"""Messages for the person running the job. They go to stderr, one line each,
so they never mix with the measured command's stdout that result tables parse."""

from __future__ import annotations

import sys


def say(message: str) -> None:
    print(f"jpwr: {message}", file=sys.stderr, flush=True)


def one_line(err: BaseException) -> str:
    """An exception as one short line (vendor errors can span several)."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."
