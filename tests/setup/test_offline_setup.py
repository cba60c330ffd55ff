"""Offline set-up without a usable torch and without torch in the
wheelhouse ends with one error that names both fixes, not with pip's
resolution conflict."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A checkout whose package asks for torch like the suite's `torch` extra
# does; its in-tree build backend answers pip's metadata question without
# the network (the suite's own backend, setuptools, would first have to
# come from the wheelhouse too).
PYPROJECT = '''
[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]

[project]
name = "mini"
version = "0.1"
'''

BACKEND = '''
import os

METADATA = """Metadata-Version: 2.1
Name: mini
Version: 0.1
Provides-Extra: torch
Requires-Dist: torch==2.13.0; extra == "torch"
"""


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, "mini-0.1.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(METADATA)
    return "mini-0.1.dist-info"


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("not reached: torch cannot be found first")
'''


def _checkout(tmp_path: Path) -> Path:
    checkout = tmp_path / "checkout"
    (checkout / "aux").mkdir(parents=True)
    for name in ("setup.sh", "checkout_path.sh", "constraints.txt"):
        shutil.copy2(ROOT / "aux" / name, checkout / "aux" / name)
    (checkout / "pyproject.toml").write_text(PYPROJECT)
    (checkout / "backend.py").write_text(BACKEND)
    return checkout


def _setup(checkout: Path, wheelhouse: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")
           and k not in ("VIRTUAL_ENV", "CARAML_VENV", "PYTHONPATH")}
    env.update(PIP_CONFIG_FILE=os.devnull, CARAML_SYSTEM_TORCH="0",
               CARAML_WHEELHOUSE=str(wheelhouse), CARAML_VENV=str(tmp_path / "venv"))
    return subprocess.run(["bash", str(checkout / "aux" / "setup.sh")], env=env, capture_output=True,
                          text=True, timeout=600)


def test_a_wheelhouse_without_torch_names_both_fixes(tmp_path):
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    done = _setup(_checkout(tmp_path), wheelhouse, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if "ERROR" in line]
    assert len(errors) == 1, done.stderr
    error = errors[0]
    assert error.startswith(f"[caraml setup] ERROR: the wheelhouse {wheelhouse} holds no torch")
    assert "python3 aux/wheelhouse.py DIR --with-torch" in error
    assert "CARAML_SYSTEM_TORCH=1" in error


def test_a_wheelhouse_with_torch_goes_on_to_pip(tmp_path):
    """With a torch wheel in the wheelhouse, pip runs (and here fails, the
    wheel being empty: pip's error, not the set-up's torch message)."""
    checkout = _checkout(tmp_path)
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    done = _setup(checkout, wheelhouse, tmp_path)
    assert done.returncode == 1
    assert "holds no torch" not in done.stderr
    assert "pip could not install the suite" in done.stderr
