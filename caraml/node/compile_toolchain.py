"""What torch.compile needs on a GPU node before its first kernel: Triton
builds a small C launcher for each kernel with a C compiler (CC, else gcc,
else clang, as Triton looks them up) against Python's headers (Python.h of
this interpreter's default install scheme). A node without either fails in
the first training step with a compiler traceback; checked here, it is one
line before any work.

megatron-core compiles its fused bias-activation, bias-dropout-add and
norm functions with torch.compile (megatron.core.jit), so the megatron
backend needs this on every GPU run; every other path that compiles (the
image and operator drivers' --compile, the torch LLM backend's) on every
GPU run that compiles (check_on)."""

from __future__ import annotations

import os
import shutil
import sysconfig
from collections.abc import Mapping
from pathlib import Path

from caraml.report import BenchmarkInputError


def python_include_dir() -> str:
    scheme = sysconfig.get_default_scheme()
    # Debian's posix_local scheme has no headers of its own (Triton does the same).
    if scheme == "posix_local":
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]


def missing(env: Mapping[str, str] = os.environ, include_dir: str | None = None) -> str | None:
    """What torch.compile's Triton kernels lack here, in words, or None."""
    lacks = []
    cc = env.get("CC")
    path = env.get("PATH", "")
    if cc is not None:
        if shutil.which(cc, path=path) is None:
            lacks.append(f"the C compiler CC={cc} is not found")
    elif shutil.which("gcc", path=path) is None and shutil.which("clang", path=path) is None:
        lacks.append("no C compiler (CC unset, no gcc or clang on PATH)")
    headers = Path(include_dir or python_include_dir()) / "Python.h"
    if not headers.is_file():
        lacks.append(f"no Python headers ({headers})")
    return "; ".join(lacks) or None


def check(what: str, env: Mapping[str, str] = os.environ, include_dir: str | None = None) -> None:
    """A BenchmarkInputError naming what `what` (which uses torch.compile) lacks here."""
    lacks = missing(env, include_dir)
    if lacks is not None:
        raise BenchmarkInputError(
            f"{what} compiles kernels with torch.compile (Triton), which needs a C compiler "
            f"and Python's headers: {lacks}; load a compiler module or install gcc and the "
            f"python3-dev headers on the node (or in the container)")


def check_on(device_type: str, what: str) -> None:
    """check(what) where torch.compile builds Triton kernels: on a GPU
    (ROCm's torch calls its GPUs cuda too)."""
    if device_type == "cuda":
        check(what)
