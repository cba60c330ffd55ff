"""`pip install .` of a checkout gives working console scripts: their
imports (matplotlib for caraml-compare's plots) are the core package's
dependencies, and --version names the suite's version and commit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

from tests.checkouts import copy_tree


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()


def _copy_checkout(dest: Path) -> str:
    """The checkout's files (tracked and new, not ignored) as a repository
    of one commit; returns that commit."""
    copy_tree(dest)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy")
    return _git(dest, "rev-parse", "--short=12", "HEAD")


def test_pip_install_gives_working_version_commands(tmp_path):
    source = tmp_path / "checkout"
    commit = _copy_checkout(source)
    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    # The dependencies come from this environment (a .pth line), so the
    # install needs no network: --no-deps, and the check below proves that
    # every import the commands make is one of the core dependencies.
    site = next((target / "lib").glob("python3*/site-packages"))
    (site / "base.pth").write_text(
        "\n".join(p for p in sys.path if p.endswith("site-packages")) + "\n")
    python = target / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                           "--no-deps", "--no-build-isolation", str(source)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.rmtree(source / "build", ignore_errors=True)
    for program in ("caraml-compare", "jpwr"):
        run = subprocess.run([str(target / "bin" / program), "--version"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == f"{program} 0.1.0 (caraml, commit {commit})"
    # the commands ran the installed copy, not this checkout
    where = subprocess.run([str(python), "-c", "import caraml.compare.cli as m; print(m.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    requires = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                               "print('\\n'.join(m.requires('caraml')))"],
                              env=env, capture_output=True, text=True, timeout=60).stdout.splitlines()
    core = [r for r in requires if "extra ==" not in r]
    assert any(r.startswith("matplotlib") for r in core), core
