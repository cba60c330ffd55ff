"""The Navier-Stokes solver's physics, and its cache: checksummed, written
whole, remade when damaged, one line when it cannot be written."""

import math

import pytest
import torch

from caraml.report import BenchmarkInputError
from operator_benchmark import navier_stokes as ns

CPU = torch.device("cpu")


def taylor_green(n: int) -> torch.Tensor:
    """sin(2 pi x) sin(2 pi y): every mode has |k|^2 = 8 pi^2, so the
    advection term vanishes and viscosity alone decays it, exactly as
    exp(-8 pi^2 nu t)."""
    x = torch.arange(n, dtype=torch.float32) / n
    return (torch.sin(2 * math.pi * x)[:, None] * torch.sin(2 * math.pi * x)[None, :])[None]


def test_a_taylor_green_vortex_decays_at_the_viscous_rate():
    setup = ns.Setup(grid=32, samples=1, viscosity=0.01, dt=1e-3)
    w0 = taylor_green(32)
    w1 = ns.evolve(w0, 1.0, setup, ns.Spectral(32, CPU), force=None)
    expected = w0 * math.exp(-8 * math.pi**2 * 0.01 * 1.0)
    assert (w1 - expected).abs().max() < 1e-4


def enstrophy(w: torch.Tensor) -> torch.Tensor:
    return w.square().mean(dim=(-2, -1))


def unforced(viscosity: float, w0: torch.Tensor, times: int) -> list[torch.Tensor]:
    setup = ns.Setup(grid=w0.shape[-1], samples=w0.shape[0], viscosity=viscosity)
    spectral = ns.Spectral(setup.grid, CPU)
    states = [w0]
    for _ in range(times):
        states.append(ns.evolve(states[-1], 0.1, setup, spectral, force=None))
    return states


@pytest.fixture(scope="module")
def random_fields():
    setup = ns.Setup(grid=32, samples=4)
    return ns.random_vorticity(setup, 4, torch.Generator().manual_seed(0),
                               ns.Spectral(32, CPU))


def test_without_forcing_enstrophy_falls_and_faster_with_more_viscosity(random_fields):
    # d/dt of the mean of w^2 is -2 nu times the mean of |grad w|^2 in 2D
    # (advection only moves vorticity around)
    low, high = unforced(1e-3, random_fields, 5), unforced(1e-2, random_fields, 5)
    for states in (low, high):
        z = torch.stack([enstrophy(w) for w in states])
        assert (z[1:] < z[:-1]).all()
    assert (enstrophy(high[-1]) < enstrophy(low[-1])).all()


def test_the_kinetic_energy_falls_too(random_fields):
    spectral = ns.Spectral(32, CPU)
    energies = []
    for w in unforced(1e-3, random_fields, 3):
        u, v = spectral.velocity(torch.fft.rfft2(w))
        energies.append((u.square() + v.square()).mean(dim=(-2, -1)))
    assert all((b < a).all() for a, b in zip(energies, energies[1:]))


def test_halving_the_time_step_changes_the_samples_little():
    coarse = ns.generate(ns.Setup(grid=32, samples=2, t1=0.5), CPU)[1]
    fine = ns.generate(ns.Setup(grid=32, samples=2, t1=0.5, dt=0.005), CPU)[1]
    assert (coarse - fine).norm() / fine.norm() < 1e-2


def test_samples_are_the_initial_field_and_what_it_evolves_into():
    setup = ns.Setup(grid=16, samples=3, t1=0.2)
    inputs, outputs = ns.generate(setup, CPU)
    assert inputs.shape == outputs.shape == (3, 1, 16, 16)
    assert inputs.dtype == torch.float32
    rms = inputs.square().mean(dim=(1, 2, 3)).sqrt()
    assert torch.allclose(rms, torch.full((3,), setup.amplitude), rtol=1e-4)
    assert not torch.allclose(inputs, outputs, atol=1e-2)
    again = ns.generate(setup, CPU)  # deterministic for a seed
    assert torch.equal(again[0], inputs) and torch.equal(again[1], outputs)


TINY = ns.Setup(grid=16, samples=4, t1=0.05)


def test_the_cache_is_written_once_and_read_back(tmp_path, monkeypatch):
    made = ns.load_or_make(TINY, CPU, tmp_path)
    path = ns.cache_path(TINY, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, path.name + ".sha256"]

    def no_generation(*args):
        raise AssertionError("a whole cache was generated again")

    monkeypatch.setattr(ns, "generate", no_generation)
    read = ns.load_or_make(TINY, CPU, tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(made, read))
    assert all(torch.equal(a, b) for a, b in zip(made, ns.load(TINY, tmp_path)))


def test_another_setup_has_another_cache():
    assert ns.cache_path(TINY, ns.DEFAULT_CACHE) != ns.cache_path(
        ns.Setup(grid=16, samples=4, t1=0.05, viscosity=2e-3), ns.DEFAULT_CACHE)


def test_the_cache_folder_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(ns.CACHE_VARIABLE, str(tmp_path))
    assert ns.cache_folder() == tmp_path
    monkeypatch.delenv(ns.CACHE_VARIABLE)
    assert ns.cache_folder() == ns.DEFAULT_CACHE


def flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage, cause", [
    (lambda p: flip_a_byte(p), "does not match its checksum"),
    (lambda p: p.write_bytes(p.read_bytes()[:100]), "does not match its checksum"),
    (lambda p: p.with_name(p.name + ".sha256").unlink(), ".sha256 is missing"),
])
def test_a_damaged_cache_is_named_in_a_warning_and_made_again(tmp_path, capsys, damage, cause):
    made = ns.load_or_make(TINY, CPU, tmp_path)
    path = ns.cache_path(TINY, tmp_path)
    damage(path)
    capsys.readouterr()
    again = ns.load_or_make(TINY, CPU, tmp_path)
    warnings = [line for line in capsys.readouterr().out.splitlines()
                if line.startswith("CARAML warning: ")]
    assert len(warnings) == 1 and cause in warnings[0] and "made again" in warnings[0]
    assert all(torch.equal(a, b) for a, b in zip(made, again))
    assert not isinstance(ns.read(path), str)  # whole again, checksum and all


def test_a_cache_that_cannot_be_written_is_one_line_naming_the_variable(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.raises(BenchmarkInputError, match=f"cannot be written.*{ns.CACHE_VARIABLE}"):
        ns.load_or_make(TINY, CPU, blocker / "cache")
    assert list(tmp_path.iterdir()) == [blocker]


def test_a_failed_write_leaves_no_partial_file(tmp_path, monkeypatch):
    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ns.os, "fsync", full_disk)
    with pytest.raises(BenchmarkInputError, match="No space left on device"):
        ns.load_or_make(TINY, CPU, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_reading_a_cache_another_rank_did_not_make_is_one_line(tmp_path):
    with pytest.raises(BenchmarkInputError, match="is missing; run again"):
        ns.load(TINY, tmp_path)


def test_the_velocity_is_the_one_whose_curl_is_the_vorticity():
    # w = sin(2 pi x): psi = sin(2 pi x) / (4 pi^2), so u = 0 and
    # v = -d psi/dx = -cos(2 pi x) / (2 pi); curl (u, v) = dv/dx - du/dy = w
    n = 16
    x = torch.arange(n, dtype=torch.float32) / n
    w = torch.sin(2 * math.pi * x)[None, :].expand(n, n)[None]  # fields are [y, x]
    u, v = ns.Spectral(n, CPU).velocity(torch.fft.rfft2(w))
    assert u.abs().max() < 1e-6
    expected = (-torch.cos(2 * math.pi * x) / (2 * math.pi))[None, :].expand(n, n)
    assert (v[0] - expected).abs().max() < 1e-6


def test_without_viscosity_and_forcing_advection_keeps_energy_and_enstrophy(random_fields):
    # the nonlinear term only moves vorticity around: a velocity that is not
    # divergence-free, or an advection term of the wrong form, would not keep both
    setup = ns.Setup(grid=32, samples=4, viscosity=0.0)
    spectral = ns.Spectral(32, CPU)
    w1 = ns.evolve(random_fields, 0.2, setup, spectral, force=None)
    assert not torch.allclose(w1, random_fields, atol=0.1)  # it did move

    def energy(w):
        u, v = spectral.velocity(torch.fft.rfft2(w))
        return (u.square() + v.square()).mean(dim=(-2, -1))

    torch.testing.assert_close(enstrophy(w1), enstrophy(random_fields), rtol=0.02, atol=0)
    torch.testing.assert_close(energy(w1), energy(random_fields), rtol=0.01, atol=0)
