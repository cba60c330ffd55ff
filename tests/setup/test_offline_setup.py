"""Offline set-up from a wheelhouse: it installs the lock's layers with
their hashes checked, the test layer only when asked; without a usable
torch and without torch in the wheelhouse it ends with one error that
names both fixes, not with pip's resolution conflict."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.setup.wheels import lock_entry, wheel

ROOT = Path(__file__).resolve().parents[2]

# A checkout whose package asks for torch like the suite's `torch` extra
# does; its in-tree build backend builds it without the network (the
# suite's own backend, setuptools, would first have to come from the
# wheelhouse too).
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
import zipfile

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
    info = "mini-0.1.dist-info"
    files = {info + "/METADATA": METADATA, "mini.pth": os.getcwd() + "\\n",
             info + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: mini\\nRoot-Is-Purelib: true\\n"
                                 "Tag: py3-none-any\\n"}
    name = "mini-0.1-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
        z.writestr(info + "/RECORD", "".join(p + ",,\\n" for p in [*files, info + "/RECORD"]))
    return name
'''


def _checkout(tmp_path: Path, lock: dict[str, str] | None = None) -> Path:
    """The mini checkout with the set-up and the suite's lock, or a lock of
    the given layers' texts"""
    checkout = tmp_path / "checkout"
    (checkout / "aux").mkdir(parents=True)
    for name in ("setup.sh", "checkout_path.sh", "log_level.sh", "lock.py"):
        shutil.copy2(ROOT / "aux" / name, checkout / "aux" / name)
    if lock is None:
        shutil.copytree(ROOT / "aux" / "lock", checkout / "aux" / "lock")
    else:
        (checkout / "aux" / "lock").mkdir()
        for layer in (ROOT / "aux" / "lock").glob("*.txt"):
            (checkout / "aux" / "lock" / layer.name).write_text(lock.get(layer.stem, ""))
    (checkout / "pyproject.toml").write_text(PYPROJECT)
    (checkout / "backend.py").write_text(BACKEND)
    return checkout


def _setup(checkout: Path, wheelhouse: Path, tmp_path: Path, extras: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")
           and k not in ("VIRTUAL_ENV", "CARAML_VENV", "PYTHONPATH")}
    # CARAML_EXTRAS as asked, not the test command's own
    env.update(PIP_CONFIG_FILE=os.devnull, CARAML_SYSTEM_TORCH="0", CARAML_EXTRAS=extras,
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


def _mini_lock(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A wheelhouse and a lock: torch (no torchvision, so the final torch
    check fails after pip's work) and a package in the main layer, one
    package in the test layer, the other layers empty"""
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    torch = wheel(wheelhouse, "torch", "2.13.0")
    main = wheel(wheelhouse, "mainpkg", "1.0")
    test = wheel(wheelhouse, "testpkg", "1.0")
    return wheelhouse, {"main": lock_entry("mainpkg", "1.0", [main]) + lock_entry("torch", "2.13.0", [torch]),
                        "test": lock_entry("testpkg", "1.0", [test])}


def _site_names(tmp_path: Path) -> list[str]:
    site = next((tmp_path / "venv" / "lib").glob("python3*/site-packages"))
    return sorted(p.name for p in site.glob("*.dist-info") if not p.name.startswith(("pip-", "setuptools-")))


def test_the_main_layer_is_installed_hashed_and_the_test_layer_only_when_asked(tmp_path):
    wheelhouse, lock = _mini_lock(tmp_path)
    checkout = _checkout(tmp_path, lock)
    done = _setup(checkout, wheelhouse, tmp_path)
    # pip's work is done; the torch check, the last step, fails on the mini torch
    assert "torch/torchvision do not work together" in done.stderr, done.stdout + done.stderr
    assert "from the lock's layers main " in done.stdout
    assert _site_names(tmp_path) == ["mainpkg-1.0.dist-info", "mini-0.1.dist-info", "torch-2.13.0.dist-info"]
    done = _setup(checkout, wheelhouse, tmp_path, extras="test")
    assert "from the lock's layers main,reframe,h5,test " in done.stdout, done.stdout + done.stderr
    assert "testpkg-1.0.dist-info" in _site_names(tmp_path)


def test_a_wheel_that_does_not_match_the_lock_stops_the_setup(tmp_path):
    wheelhouse, lock = _mini_lock(tmp_path)
    wheel(wheelhouse, "mainpkg", "1.0", ["other"])  # the same file name, other bytes
    done = _setup(_checkout(tmp_path, lock), wheelhouse, tmp_path)
    assert done.returncode == 1
    assert "DO NOT MATCH THE HASHES" in done.stderr, done.stdout + done.stderr
    assert "pip could not install the suite" in done.stderr.splitlines()[-1]
    assert "mainpkg-1.0.dist-info" not in _site_names(tmp_path)


def _shim(path: Path, python: Path, refuse_venv: bool = False) -> None:
    """A Python on PATH; `refuse_venv`: one without ensurepip, as Debian's
    without python3-venv and a container's venv made by uv are"""
    refusal = ('if [ "$1 $2" = "-m venv" ] && [[ " $* " != *" --without-pip "* ]]; then\n'
               '    echo "Error: ensurepip is not available" >&2; exit 1\nfi\n') if refuse_venv else ""
    path.write_text(f"#!/bin/bash\n{refusal}exec {python} \"$@\"\n")
    path.chmod(0o755)


def test_a_nodes_torch_in_a_venv_of_its_own_without_ensurepip_is_kept(tmp_path):
    """A container's torch in /opt/.../.venv, on a Python without ensurepip,
    beside newer Pythons without torch: the set-up picks the Python with
    torch, makes the venv without pip, sees that venv's packages (torch and
    pip) and installs the lock's packages beside them"""
    import sys
    import venv

    from tests.setup.test_node_torch import _pip_alone
    from tests.setup.wheels import installed

    bare = Path(sys._base_executable)
    node = tmp_path / "node-venv"
    venv.EnvBuilder(with_pip=False).create(node)
    node_site = next((node / "lib").glob("python3*/site-packages"))
    installed(node_site, "torch", "2.6.0a0")
    (node_site / "pip").symlink_to(_pip_alone(tmp_path) / "pip")
    shims = tmp_path / "bin"
    shims.mkdir()
    for name in ("python3.13", "python3.12", "python3.11"):
        _shim(shims / name, bare)
    _shim(shims / "python3", node / "bin" / "python", refuse_venv=True)

    wheelhouse, lock = _mini_lock(tmp_path)
    checkout = _checkout(tmp_path, lock)
    (checkout / "aux" / "node_torch.py").write_bytes((ROOT / "aux" / "node_torch.py").read_bytes())
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")
           and k not in ("VIRTUAL_ENV", "CARAML_VENV", "PYTHONPATH", "CARAML_PYTHON")}
    env.update(PIP_CONFIG_FILE=os.devnull, CARAML_SYSTEM_TORCH="1", CARAML_EXTRAS="",
               CARAML_WHEELHOUSE=str(wheelhouse), CARAML_VENV=str(tmp_path / "venv"),
               PATH=f"{shims}{os.pathsep}{env['PATH']}")
    done = subprocess.run(["bash", str(checkout / "aux" / "setup.sh")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert "on top of its own torch" in done.stdout, done.stdout + done.stderr
    python = tmp_path / "venv" / "bin" / "python"
    seen = subprocess.run([str(python), "-c", "import torch, mainpkg, pip; print(torch.__version__)"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert seen.stdout.strip() == "2.6.0a0", seen.stderr
    assert "mainpkg-1.0.dist-info" in _site_names(tmp_path)
    assert not any(name.startswith("torch-") for name in _site_names(tmp_path))
    # the node's torch 2.6 has no torchvision 0.21 in this wheelhouse: pip says so
    assert "pip could not install the suite" in done.stderr
