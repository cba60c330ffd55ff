"""The problems table: upstream's shapes, a CPU-sized variant of each, an
FNO that fits every grid, and the command JUBE reads a value with."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from operator_benchmark import model, problems

REPO = Path(__file__).resolve().parents[2]
FULL = [n for n in problems.names() if not n.endswith(problems.SMALL_SUFFIX)]


def test_the_convection_problems_have_upstreams_shapes():
    rbc2d, rbc3d = problems.get("rbc2d"), problems.get("rbc3d")
    assert (rbc2d.grid, rbc2d.in_fields, rbc2d.out_fields) == ((256, 64), 4, 4)
    assert (rbc3d.grid, rbc3d.in_fields, rbc3d.out_fields) == ((64, 64, 32), 5, 5)
    assert [problems.get(f"pic{d}d").dims for d in (1, 2, 3)] == [1, 2, 3]


def test_every_problem_has_a_cpu_sized_variant_with_its_fields_and_data():
    assert set(FULL) >= {"pic1d", "pic2d", "pic3d", "rbc2d", "rbc3d", "navier_stokes2d"}
    for name in FULL:
        full, small = problems.get(name), problems.get(name + problems.SMALL_SUFFIX)
        assert (small.in_fields, small.out_fields, small.dims, small.data) == (
            full.in_fields, full.out_fields, full.dims, full.data)
        assert small.points < full.points and small.width <= full.width


@pytest.mark.parametrize("name", problems.names())
def test_the_kept_modes_fit_the_grid(name):
    # a real FFT of n points has n // 2 + 1 frequencies; kept modes beyond
    # them would be weights that never meet a signal
    p = problems.get(name)
    assert len(p.modes) == p.dims
    assert all(0 < m <= n // 2 for m, n in zip(p.modes, p.grid))


def test_only_navier_stokes_trains_on_generated_data():
    assert {n for n, p in problems.PROBLEMS.items() if p.data == problems.GENERATED} == {
        "navier_stokes2d", "navier_stokes2d-small"}


@pytest.mark.parametrize("name", [n + problems.SMALL_SUFFIX for n in FULL])
def test_the_fno_maps_the_input_fields_to_the_output_fields_on_the_grid(name):
    p = problems.get(name)
    net = model.build(p, torch.device("cpu"))
    with torch.no_grad():
        out = net(torch.randn(2, p.in_fields, *p.grid))
    assert out.shape == (2, p.out_fields, *p.grid)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "operator_benchmark.problems", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_the_command_prints_a_value_without_a_newline_for_jube():
    p = cli("rbc3d", "grid")
    assert (p.returncode, p.stdout) == (0, "64x64x32")
    assert cli("pic2d", "width").stdout == str(problems.get("pic2d").width)
    assert cli().stdout.split() == problems.names()


@pytest.mark.parametrize("args, named", [(("nope", "grid"), "unknown problem 'nope'"),
                                         (("rbc2d", "colour"), "unknown field 'colour'")])
def test_the_command_names_a_bad_problem_or_field_in_one_line(args, named):
    p = cli(*args)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("CARAML ERROR: ")
    assert named in p.stderr
