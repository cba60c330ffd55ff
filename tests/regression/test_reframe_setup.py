"""The set-up installs the lock's ReFrame layer only when asked
(CARAML_EXTRAS), keeps it in the environment's make-up, and refuses a name
that is no layer."""

from __future__ import annotations

import subprocess

from tests.setup.test_offline_setup import _checkout, _setup


def _setup_asking(tmp_path, extras: str) -> subprocess.CompletedProcess:
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir(exist_ok=True)
    # a torch wheel lets the set-up go on to pip, which then fails on the empty wheel
    (wheelhouse / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    return _setup(_checkout(tmp_path), wheelhouse, tmp_path, extras)


def test_the_reframe_extra_is_installed_when_asked_and_kept(tmp_path):
    done = _setup_asking(tmp_path, "reframe")
    assert "installing the suite [torch,main,reframe]" in done.stdout, done.stdout + done.stderr
    assert "from the lock's layers main,reframe " in done.stdout
    assert (tmp_path / "venv" / ".caraml-extras").read_text().strip() == "torch,main,reframe"


def test_without_asking_no_reframe_extra(tmp_path):
    done = _setup_asking(tmp_path, "")
    assert "installing the suite [torch,main]" in done.stdout, done.stdout + done.stderr
    assert "from the lock's layers main " in done.stdout


def test_a_name_that_is_no_extra_is_one_clear_error(tmp_path):
    done = _setup_asking(tmp_path, "reframe,../x")
    assert done.returncode == 1
    assert "CARAML_EXTRAS=reframe,../x: '../x' is no layer of the lock aux/lock/" in done.stderr
