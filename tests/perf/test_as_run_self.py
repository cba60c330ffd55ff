"""aux/perf/as_run_self.py --commits: each side's tree is the repository's
at its commit, extracted whole, and a name that is no commit stops the
comparison with one line that names it. A real git repository of two
commits stands in for the checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "aux" / "perf"))

import as_run_self


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """Two commits: the driver's file as it was and as it is"""
    repo = tmp_path / "checkout with space"
    (repo / "pkg").mkdir(parents=True)
    git(repo, "init", "-q")
    for version in ("old", "new"):
        (repo / "pkg" / "driver.py").write_text(f"VERSION = {version!r}\n")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", version)
    return repo


def test_a_side_gets_the_tree_of_its_commit(repo, tmp_path):
    folder, full = as_run_self.checked_out(repo, "HEAD~1", tmp_path / "tree")
    assert full == git(repo, "rev-parse", "HEAD~1")
    assert (folder / "pkg" / "driver.py").read_text() == "VERSION = 'old'\n"


@pytest.mark.parametrize("name", ["no-such-commit", "--output=/tmp/x"])
def test_a_name_that_is_no_commit_stops_with_one_line(repo, tmp_path, name):
    with pytest.raises(SystemExit) as stopped:
        as_run_self.checked_out(repo, name, tmp_path / "tree")
    message = str(stopped.value)
    assert message.startswith(f"--commits: {name!r} is no commit of {repo}")
    assert "\n" not in message
    assert not (tmp_path / "tree").exists()
