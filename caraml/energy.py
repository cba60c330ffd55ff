"""Energy measurement around a driver's training run: every rank runs jpwr
and writes its own files (suffix _rank<R>) into one folder, which the
benchmark's combine_energy step folds into one figure with `jpwr combine`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from jpwr.ctxmgr import get_power
from jpwr.methods import from_names


@contextmanager
def measured(out_dir: str | Path, rank: int, methods: Sequence[str] = ("auto",),
             interval_ms: int = 100) -> Iterator[object]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with get_power(from_names(list(methods)), interval_ms, out_dir=out,
                   suffix=f"_rank{rank}") as scope:
        yield scope
