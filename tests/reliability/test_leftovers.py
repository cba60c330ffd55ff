"""Nothing the suite makes outlives its run in the machine's temporary
folder or in the checkout: its locks (the user's runtime folder, else the
folder they guard; each goes when released), ReFrame's logs (under the
run's prefix, whichever configuration runs the checks). Each run here has
a temporary folder of its own (TMPDIR), looked at before and after; the
main command's: tests/reliability/test_main_command.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from caraml.login.host_locks import jube_folder_lock, run_jube
from tests.checkouts import copy_tree

ROOT = Path(__file__).resolve().parents[2]
REFRAME = [sys.executable, "-c", "import sys; from reframe.frontend.cli import main; sys.exit(main())"]


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


@pytest.mark.parametrize("runtime", [False, True], ids=["no-runtime-folder", "runtime-folder"])
def test_a_jube_lock_is_never_in_the_temporary_folder_and_goes_when_released(tmp_path, monkeypatch, runtime):
    tmp, xdg, scripts = tmp_path / "tmp", tmp_path / "run-user", tmp_path / "scripts"
    for folder in (tmp, xdg, scripts):
        folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr("tempfile.tempdir", None)
    if runtime:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    else:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    script = scripts / "bench.xml"
    # JUBE's banner at once, then a look at where the lock is while JUBE would parse
    lock = jube_folder_lock(script)
    assert lock.parent == (xdg if runtime else scripts), lock
    looked = "import os, sys; print('# id: 3', flush=True); print(os.path.exists(sys.argv[-1]))"
    done = run_jube([sys.executable, "-c", looked, "run", str(script), str(lock)], timeout=120)
    assert done.returncode == 0, done.stderr
    assert not list(tmp.iterdir()) and not lock.exists()
    assert _tree(scripts) == set() and _tree(xdg) == set()


def test_a_command_run_with_a_lock_held_leaves_no_lock_file(tmp_path):
    lock = tmp_path / "stage" / ".caraml-local-jobs.lock"
    lock.parent.mkdir()
    held = "import sys; from pathlib import Path; sys.exit(0 if Path(sys.argv[1]).exists() else 5)"
    done = subprocess.run([sys.executable, "-m", "caraml.login.host_locks", "hold", str(lock), "--",
                           sys.executable, "-c", held, str(lock)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr  # the command ran with the lock there
    assert not lock.exists()
    failed = subprocess.run([sys.executable, "-m", "caraml.login.host_locks", "hold", str(lock), "--",
                             sys.executable, "-c", "raise SystemExit(3)"], cwd=ROOT, timeout=120)
    assert failed.returncode == 3 and not lock.exists()


def _reframe(cwd: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    # PWD: the folder a shell starts ReFrame in (ReFrame moves to its configuration's to read it)
    env = {**os.environ, "TMPDIR": str(tmp), "PWD": str(cwd),
           "PYTHONPATH": str(cwd if (cwd / "caraml").is_dir() else ROOT)}
    env.pop("RFM_PREFIX", None)
    return subprocess.run([*REFRAME, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_a_reframe_run_in_the_checkout_leaves_its_files_with_its_results_not_in_the_checkout(tmp_path):
    checkout = copy_tree(tmp_path / "repo")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    before = _tree(checkout)
    done = _reframe(checkout, tmp, "-C", "regression/config.py", "-c", "regression/checks", "-l")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    new = _tree(checkout) - before
    assert new <= {"results", "results/reframe", "results/reframe/reframe.log"}, sorted(new)
    assert not list(tmp.iterdir()), list(tmp.iterdir())
    assert f"Log file(s) saved in '{checkout / 'results' / 'reframe' / 'reframe.log'}'" in done.stdout


CENTRE = """
site_configuration = {
    "systems": [{"name": "centre", "descr": "a login node", "hostnames": [".*"],
                 "partitions": [{"name": "cpu", "scheduler": "local", "launcher": "local",
                                 "environs": ["gnu"]}]}],
    "environments": [{"name": "gnu"}],
}
"""


def test_under_a_centres_configuration_reframes_logs_go_under_its_prefix(tmp_path):
    (tmp_path / "centre.py").write_text(CENTRE)
    tmp, prefix = tmp_path / "tmp", tmp_path / "rfm"
    tmp.mkdir()
    done = _reframe(tmp_path, tmp, "-C", str(tmp_path / "centre.py"), "-c",
                    str(ROOT / "regression" / "checks"), "--prefix", str(prefix), "-l",
                    "-S", "valid_prog_environs=gnu")
    assert done.returncode == 0 and "Found 3 check(s)" in done.stdout, done.stdout[-3000:]
    assert not list(tmp.iterdir()), "ReFrame's logs were left in the temporary folder"
    assert (prefix / "reframe.log").is_file()
    assert f"Log file(s) saved in '{prefix / 'reframe.log'}'" in done.stdout
