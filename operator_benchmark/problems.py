"""The problems the operator benchmark trains an FNO on, in one place: each
problem's fields in and out, its grid, its FNO (Fourier modes kept per
dimension, width, layers) and its data, plus a CPU-sized variant of each
(`<name>-small`) for the CPU path, the README's main command and the tests.

The convection problems have upstream CARAML's shapes: Rayleigh-Benard 2D,
4 fields (temperature, two velocity components, pressure) on 256x64, and
3D, 5 fields (temperature, three velocity components, pressure) on
64x64x32. Upstream gives no shapes for its plasma (PIC) problems; the
suite's are its own choice (docs/operator_benchmark.md). navier_stokes2d
trains on the vorticity data the suite generates itself
(operator_benchmark/navier_stokes.py): w(t0) in, w(t1) out.

JUBE scripts read a value without Python in their source:

    python -m operator_benchmark.problems                 # the names, one a line
    python -m operator_benchmark.problems rbc2d grid      # 256x64 (no newline)
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from caraml import report

SYNTHETIC = "synthetic"
GENERATED = "generated"
SMALL_SUFFIX = "-small"


@dataclass(frozen=True)
class Problem:
    """One problem's shape and model. A sample is `in_fields` fields on the
    grid in and `out_fields` fields on the same grid out."""

    name: str
    description: str
    grid: tuple[int, ...]
    in_fields: int
    out_fields: int
    modes: tuple[int, ...]  # Fourier modes kept per dimension (neuraloperator's n_modes)
    width: int  # channels of the Fourier layers (hidden_channels)
    layers: int
    data: str = SYNTHETIC  # the only --data the problem takes

    @property
    def dims(self) -> int:
        return len(self.grid)

    @property
    def points(self) -> int:
        return math.prod(self.grid)

    @property
    def grid_text(self) -> str:
        return "x".join(map(str, self.grid))

    def value(self, field: str) -> str:
        """A field as text, for the command line (a shape as 256x64)."""
        if field not in FIELDS:
            raise KeyError(f"unknown field {field!r}; the fields are {', '.join(FIELDS)}")
        v = getattr(self, field)
        return "x".join(map(str, v)) if isinstance(v, tuple) else str(v)


FIELDS = ("description", "grid", "dims", "points", "in_fields", "out_fields", "modes",
          "width", "layers", "data")


def _small(p: Problem, grid: tuple[int, ...], modes: tuple[int, ...], width: int,
           layers: int) -> Problem:
    """The CPU-sized variant: the same fields and data, a coarser grid and a
    narrower, shallower FNO, so a smoke run of a few iterations takes
    seconds on two CPU cores."""
    return Problem(p.name + SMALL_SUFFIX, f"{p.description} (CPU-sized)", grid, p.in_fields,
                   p.out_fields, modes, width, layers, p.data)


_FULL = (
    Problem("pic1d", "plasma particle-in-cell 1D: density and electric field", (4096,), 2, 2,
            (64,), 64, 4),
    Problem("pic2d", "plasma particle-in-cell 2D: density and electric field", (256, 256), 3, 3,
            (32, 32), 64, 4),
    Problem("pic3d", "plasma particle-in-cell 3D: density and electric field", (64, 64, 64), 4,
            4, (16, 16, 16), 32, 4),
    Problem("rbc2d", "Rayleigh-Benard convection 2D: temperature; velocity; pressure",
            (256, 64), 4, 4, (32, 16), 64, 4),
    Problem("rbc3d", "Rayleigh-Benard convection 3D: temperature; velocity; pressure",
            (64, 64, 32), 5, 5, (16, 16, 8), 32, 4),
    Problem("navier_stokes2d", "incompressible Navier-Stokes 2D vorticity (generated)",
            (64, 64), 1, 1, (16, 16), 32, 4, GENERATED),
)
_SMALL_SHAPES = {
    "pic1d": ((256,), (16,), 16, 2),
    "pic2d": ((32, 32), (8, 8), 16, 2),
    "pic3d": ((16, 16, 16), (4, 4, 4), 8, 2),
    "rbc2d": ((64, 16), (8, 4), 16, 2),
    "rbc3d": ((16, 16, 8), (4, 4, 4), 8, 2),
    "navier_stokes2d": ((32, 32), (8, 8), 16, 2),
}
PROBLEMS: dict[str, Problem] = {p.name: p for p in _FULL} | {
    s.name: s for s in (_small(p, *_SMALL_SHAPES[p.name]) for p in _FULL)}


def names() -> list[str]:
    return list(PROBLEMS)


def get(name: str) -> Problem:
    """The problem of that name; KeyError naming the known ones."""
    try:
        return PROBLEMS[name]
    except KeyError:
        raise KeyError(f"unknown problem {name!r}; the problems are "
                       f"{' '.join(names())}") from None


def main(argv: list[str]) -> int:
    if not argv:
        print("\n".join(names()))
        return 0
    if len(argv) != 2:
        print("usage: python -m operator_benchmark.problems [NAME FIELD]", file=sys.stderr)
        return 2
    try:
        report.parameter(get(argv[0]).value(argv[1]))
    except KeyError as e:
        report.error(e.args[0])
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
