"""A device's measured dense matmul rate: the MFU denominator where no
datasheet peak applies, e.g. on a CPU host, whose effective peak depends on
its vector units and on the precision (bf16 on a CPU without AVX-512 or AMX
runs far below its fp32 rate).

The rule: several short windows, each the fastest product it timed; the
rate kept is the best window. Another job can only slow a product down,
never speed it up, so the best window is the one least disturbed, and one
window that another job held through (0.0014 against 0.2 TFLOP/s on the
shared development host) cannot pull the rate down the way a mean or a
single window would. The windows' spread is reported beside it."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

LARGEST_SIDE = 8192
# windows per measurement, and the seconds they share
WINDOWS = 5
SECONDS = 1.5


@dataclass(frozen=True)
class MatmulRate:
    """The TFLOP/s of each window; the kept rate is the best of them."""

    windows: tuple[float, ...]

    @property
    def tflops(self) -> float:
        return max(self.windows)

    @property
    def median(self) -> float:
        return statistics.median(self.windows)

    @property
    def spread_pct(self) -> float:
        """How far the slowest window fell below the kept one."""
        return 100 * (max(self.windows) - min(self.windows)) / max(self.windows)

    def __add__(self, other: MatmulRate) -> MatmulRate:
        return MatmulRate(self.windows + other.windows)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _operands(device: torch.device, dtype: torch.dtype, budget: float):
    """Square operands grown until one product takes a fiftieth of the
    budget, so per-call overheads do not understate the rate; with the
    time of the last product."""

    def timed_product(n: int):
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        F.linear(a, b)  # first call: allocation, kernel selection, thread start-up
        _sync(device)
        t0 = time.perf_counter()
        F.linear(a, b)
        _sync(device)
        return a, b, time.perf_counter() - t0

    n = 256
    a, b, t = timed_product(n)
    while t < budget / 50 and n < LARGEST_SIDE:
        n *= 2
        a, b, t = timed_product(n)
    return a, b, t


def _fastest(a: torch.Tensor, b: torch.Tensor, seconds: float, fastest: float) -> float:
    """The fastest product of a window of `seconds`."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        # F.linear, the GEMM the models' linear layers run: on a CPU its 16-bit
        # path (oneDNN) is several times faster than that of `a @ b`.
        F.linear(a, b)
        _sync(a.device)
        fastest = min(fastest, time.perf_counter() - t0)
    return fastest


def measure_tflops(device: torch.device, dtype: torch.dtype, seconds: float = SECONDS) -> float:
    """TFLOP/s of square matmuls at `dtype`: the fastest of the products run
    in one window of about `seconds`."""
    a, b, t = _operands(device, dtype, seconds)
    return 2 * a.shape[0] ** 3 / _fastest(a, b, seconds, t) / 1e12


def measure(device: torch.device, dtype: torch.dtype, windows: int = WINDOWS,
            seconds: float = SECONDS) -> MatmulRate:
    """`windows` windows sharing `seconds`, each the fastest product it timed."""
    a, b, _ = _operands(device, dtype, seconds / windows)
    flop = 2 * a.shape[0] ** 3
    return MatmulRate(tuple(flop / _fastest(a, b, seconds / windows, float("inf")) / 1e12
                            for _ in range(windows)))
