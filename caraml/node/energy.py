"""Energy measurement around a driver's training run: every rank runs jpwr
and writes its own files (suffix _rank<R>) into one folder, which the
benchmark's combine_energy step folds into one figure with `jpwr combine`.
The measurement covers the whole training loop (warm-up included); the
timed iterations are a named window of it (TimedWindow), so each gets its
own Wh and work per Wh."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jpwr.ctxmgr import PowerScope

# The window's name in jpwr's files and in the `jpwr-window:` line.
TIMED = "timed"


def check_methods(methods: Sequence[str]) -> None:
    """Raises ImportError where jpwr does not import and ValueError for a
    method jpwr does not know: both before training, not after. Imports
    what measured() needs now, before the model's memory: pandas imported
    between the model's set-up and its loop cost the FNO's CPU step about
    3 % (docs/results.md, "Where the FNO's as-run gap came from")."""
    import jpwr.ctxmgr  # noqa: F401 - imported for its place in the heap, see above
    from jpwr.methods import check_names

    check_names(list(methods))


@contextmanager
def measured(out_dir: str | Path, rank: int, methods: Sequence[str] = ("auto",),
             interval_ms: int = 100) -> Iterator[PowerScope]:
    # Imported here, and first by check_methods: the drivers turn a jpwr that
    # does not import into an input error before training, and the loops
    # need TimedWindow without it.
    from jpwr.ctxmgr import get_power
    from jpwr.methods import from_names

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with get_power(from_names(list(methods)), interval_ms, out_dir=out,
                   suffix=f"_rank{rank}") as scope:
        yield scope


class TimedWindow:
    """Marks the timed iterations in a rank's energy files. The device is
    synchronised at both edges, so the window holds the work of exactly
    those iterations. Without a scope (energy not measured) it does nothing."""

    def __init__(self, scope: PowerScope | None, sync: Callable[[], None]) -> None:
        self._scope = scope
        self._sync = sync
        self._open = False

    def begin(self) -> None:
        if self._scope is None or self._open:
            return
        self._sync()
        self._scope.begin_window(TIMED)
        self._open = True

    def end(self) -> None:
        if self._scope is None or not self._open:
            return
        self._sync()
        self._scope.end_window(TIMED)
        self._open = False
