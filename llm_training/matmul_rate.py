"""A device's measured dense matmul rate: the MFU denominator where no
datasheet peak applies, e.g. on a CPU host, whose effective peak depends on
its vector units and on the precision (bf16 on a CPU without AVX-512 or AMX
runs far below its fp32 rate)."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F

LARGEST_SIDE = 8192


def measure_tflops(device: torch.device, dtype: torch.dtype, seconds: float = 1.5) -> float:
    """TFLOP/s of square matmuls at `dtype`: the fastest of the products run
    in about `seconds`. A peak is the best the device does; on a shared host
    an average would count other jobs' load against it and inflate MFU."""

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def timed_product(n: int) -> tuple[torch.Tensor, torch.Tensor, float]:
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        F.linear(a, b)  # first call: allocation, kernel selection, thread start-up
        sync()
        t0 = time.perf_counter()
        F.linear(a, b)
        sync()
        return a, b, time.perf_counter() - t0

    # Grow the matrices until one product takes a noticeable slice of the
    # budget, so per-call overheads do not understate the rate.
    n = 256
    a, b, t = timed_product(n)
    while t < seconds / 50 and n < LARGEST_SIDE:
        n *= 2
        a, b, t = timed_product(n)

    fastest = t
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        # F.linear, the GEMM the models' linear layers run: on a CPU its 16-bit
        # path (oneDNN) is several times faster than that of `a @ b`.
        F.linear(a, b)
        sync()
        fastest = min(fastest, time.perf_counter() - t0)
    return 2 * n**3 / fastest / 1e12
