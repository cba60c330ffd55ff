"""A small real dataset the suite makes itself: 2D incompressible
Navier-Stokes in vorticity form on the periodic unit square,

    dw/dt + u . grad(w) = nu lap(w) + f,    u = (d psi/dy, -d psi/dx),   -lap(psi) = w,

solved pseudo-spectrally in torch, on fields indexed [y, x]. A sample is a random initial vorticity
w(t0) (a Gaussian random field with covariance (tau^2 - lap)^-alpha) and the
vorticity w(t1) it evolves into; the operator learns w(t0) -> w(t1).

Numerics: Fourier in both directions (real FFTs); the Laplacian and the
Poisson solve are exact in Fourier space; the advection term is evaluated
in physical space with the 2/3 rule against aliasing; time steps are
semi-implicit: Crank-Nicolson for viscosity (unconditionally stable),
Heun's predictor-corrector for advection and forcing (explicit Euler alone
is unstable for advection at any step; Heun's is stable at the CFL numbers
the default time step gives). fp32 throughout: the samples are training
data, not a reference solution. The forcing is the usual
0.1 (sin 2 pi (x+y) + cos 2 pi (x+y)) of the FNO literature's benchmark.

The samples are cached on disk (CARAML_OPERATOR_CACHE, else
operator_benchmark/cache in the checkout) under a name derived from the
set-up, written whole (temporary file, fsync, rename) with a SHA-256
checksum beside them; a cache whose checksum does not match is made again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from caraml import report
from caraml.node.files import write_whole
from caraml.report import BenchmarkInputError

CACHE_VARIABLE = "CARAML_OPERATOR_CACHE"
DEFAULT_CACHE = Path(__file__).resolve().parent / "cache"
# Bumped when the solver changes what a set-up produces, so old caches go unused
FORMAT = 1
# Samples advanced together: bounds the solver's memory, not its result
CHUNK = 64


@dataclass(frozen=True)
class Setup:
    """Everything the samples depend on."""

    grid: int  # points per direction
    samples: int
    viscosity: float = 1e-3
    t0: float = 0.0  # the input's time: a spin-up from the random field first where > 0
    t1: float = 1.0
    dt: float | None = None  # None: 0.32 / grid (a CFL number near 0.3 at rms vorticity 3)
    alpha: float = 2.5  # the initial field's smoothness
    tau: float = 7.0  # its inverse length scale
    amplitude: float = 3.0  # its root-mean-square vorticity
    seed: int = 0

    @property
    def step(self) -> float:
        return self.dt if self.dt is not None else 0.32 / self.grid

    @property
    def key(self) -> str:
        text = json.dumps({"format": FORMAT, **dataclasses.asdict(self)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


class Spectral:
    """Wavenumbers and masks of an n x n periodic grid on the unit square,
    for real FFTs (the last dimension holds n//2 + 1 frequencies)."""

    def __init__(self, n: int, device: torch.device):
        ky = torch.fft.fftfreq(n, 1.0 / n, device=device)
        kx = torch.fft.rfftfreq(n, 1.0 / n, device=device)
        self.ky, self.kx = torch.meshgrid(2 * math.pi * ky, 2 * math.pi * kx, indexing="ij")
        self.k2 = self.kx**2 + self.ky**2
        self.inverse_k2 = torch.where(self.k2 > 0, 1 / self.k2.clamp(min=1e-30), 0.0)
        # 2/3 rule: keep the wavenumbers below two thirds of the Nyquist one
        cut = n / 3
        self.dealias = ((ky.abs()[:, None] < cut) & (kx.abs()[None, :] < cut)).float()
        self.n = n

    def velocity(self, w_hat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        psi_hat = w_hat * self.inverse_k2
        u = torch.fft.irfft2(1j * self.ky * psi_hat, s=(self.n, self.n))
        v = torch.fft.irfft2(-1j * self.kx * psi_hat, s=(self.n, self.n))
        return u, v

    def advection_hat(self, w_hat: torch.Tensor) -> torch.Tensor:
        """u . grad(w) in Fourier space, dealiased."""
        w_hat = w_hat * self.dealias
        u, v = self.velocity(w_hat)
        wx = torch.fft.irfft2(1j * self.kx * w_hat, s=(self.n, self.n))
        wy = torch.fft.irfft2(1j * self.ky * w_hat, s=(self.n, self.n))
        return torch.fft.rfft2(u * wx + v * wy) * self.dealias


def forcing(n: int, device: torch.device) -> torch.Tensor:
    x = torch.arange(n, device=device, dtype=torch.float32) / n
    s = 2 * math.pi * (x[:, None] + x[None, :])
    return 0.1 * (torch.sin(s) + torch.cos(s))


def random_vorticity(setup: Setup, count: int, generator: torch.Generator,
                     spectral: Spectral) -> torch.Tensor:
    """Gaussian random fields with mean 0 and rms `amplitude`."""
    noise = torch.randn(count, setup.grid, setup.grid, generator=generator)
    spectrum = (spectral.k2 + setup.tau**2) ** (-setup.alpha / 2)
    w_hat = torch.fft.rfft2(noise.to(spectral.k2.device)) * spectrum
    w_hat[:, 0, 0] = 0
    w = torch.fft.irfft2(w_hat, s=(setup.grid, setup.grid))
    return setup.amplitude * w / w.square().mean(dim=(1, 2), keepdim=True).sqrt()


def evolve(w: torch.Tensor, duration: float, setup: Setup, spectral: Spectral,
           force: torch.Tensor | None) -> torch.Tensor:
    """w advanced by `duration` (in whole time steps of at most setup.step)."""
    steps = math.ceil(round(duration / setup.step, 9))
    if steps == 0:
        return w
    dt = duration / steps
    w_hat = torch.fft.rfft2(w)
    f_hat = torch.fft.rfft2(force) if force is not None else 0
    half_viscous = 0.5 * dt * setup.viscosity * spectral.k2
    explicit, implicit = 1 - half_viscous, 1 + half_viscous
    for _ in range(steps):
        advection = spectral.advection_hat(w_hat)
        predicted = (explicit * w_hat + dt * (f_hat - advection)) / implicit
        advection = 0.5 * (advection + spectral.advection_hat(predicted))
        w_hat = (explicit * w_hat + dt * (f_hat - advection)) / implicit
    return torch.fft.irfft2(w_hat, s=(setup.grid, setup.grid))


def generate(setup: Setup, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, outputs), each (samples, 1, grid, grid) fp32 on the CPU."""
    spectral = Spectral(setup.grid, device)
    force = forcing(setup.grid, device)
    generator = torch.Generator().manual_seed(setup.seed)
    inputs, outputs = [], []
    for start in range(0, setup.samples, CHUNK):
        count = min(CHUNK, setup.samples - start)
        w = evolve(random_vorticity(setup, count, generator, spectral), setup.t0, setup,
                   spectral, force)
        inputs.append(w)
        outputs.append(evolve(w, setup.t1 - setup.t0, setup, spectral, force))
    def stack(parts):
        return torch.cat(parts)[:, None].cpu()
    return stack(inputs), stack(outputs)


def cache_folder() -> Path:
    return Path(os.environ.get(CACHE_VARIABLE) or DEFAULT_CACHE)


def cache_path(setup: Setup, folder: Path) -> Path:
    return folder / f"navier_stokes_{setup.grid}_{setup.samples}_{setup.key}.pt"


def _checksum_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def read(path: Path) -> tuple[torch.Tensor, torch.Tensor] | str:
    """The cached samples, or why they cannot be used (missing, checksum,
    unreadable)."""
    try:
        data = path.read_bytes()
        expected = _checksum_path(path).read_text().strip()
    except FileNotFoundError as e:
        return f"{e.filename} is missing"
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        return f"{path} does not match its checksum"
    try:
        saved = torch.load(io.BytesIO(data), weights_only=True)
        return saved["inputs"], saved["outputs"]
    except Exception as e:  # noqa: BLE001 - a checksummed file that still does not load
        return f"{path} does not load ({' '.join(str(e).split())})"


def write(setup: Setup, path: Path, inputs: torch.Tensor, outputs: torch.Tensor) -> None:
    buffer = io.BytesIO()
    torch.save({"setup": dataclasses.asdict(setup), "inputs": inputs, "outputs": outputs}, buffer)
    data = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, data)
    write_whole(_checksum_path(path), (hashlib.sha256(data).hexdigest() + "\n").encode())


def load_or_make(setup: Setup, device: torch.device,
                 folder: Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The samples of `setup`: from the cache when it is whole, else
    generated (on `device`) and cached. A cache that exists but is damaged
    gives a warning line and is made again; a cache that cannot be written
    is one BenchmarkInputError naming the folder."""
    folder = folder or cache_folder()
    path = cache_path(setup, folder)
    found = read(path)
    if not isinstance(found, str):
        return found
    if path.exists() or _checksum_path(path).exists():
        report.warning(f"generated-data cache: {found}; it is made again")
    inputs, outputs = generate(setup, device)
    try:
        write(setup, path, inputs, outputs)
    except OSError as e:
        raise BenchmarkInputError(
            f"generated-data cache {path} cannot be written ({e.strerror}); free space there or "
            f"set {CACHE_VARIABLE} to a writable folder") from None
    return inputs, outputs


def load(setup: Setup, folder: Path | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The cached samples, which another process made; BenchmarkInputError if they are not whole."""
    found = read(cache_path(setup, folder or cache_folder()))
    if isinstance(found, str):
        raise BenchmarkInputError(f"generated-data cache: {found}; run again to make it anew")
    return found
