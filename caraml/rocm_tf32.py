"""What a ROCm run needs for TF32 math: ROCm's torch lets hipBLASLt use its
xf32 (TF32) kernels only where HIPBLASLT_ALLOW_TF32=1 is in the
environment; without it a tf32 run computes IEEE fp32 under a tf32 label.
The job script exports it for a ROCm tf32 job (caraml/login/jobplan.py),
the drivers refuse ROCm tf32 without it (caraml/node/precision.py) and the
row's provenance records it (caraml/node/provenance.py). Standard library only
(the login node's planner reads it)."""

from __future__ import annotations

from collections.abc import Mapping

ENV = "HIPBLASLT_ALLOW_TF32"


def exports(device_kind: str, precision: str) -> dict[str, str]:
    """The environment a job of this device kind and precision needs for TF32."""
    return {ENV: "1"} if device_kind == "rocm" and precision == "tf32" else {}


def enabled(environ: Mapping[str, str]) -> bool:
    return environ.get(ENV) == "1"
