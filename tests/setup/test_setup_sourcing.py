"""aux/setup.sh is sourced by users in their login shell (README): a failure
inside it must not close that shell or change its options."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs in `bash -i`: records the options, sources the set-up, records them
# again, then runs a failing command and says whether the shell lived on.
CALLER = r'''
set -o | sort >"$OUT/before"
source "$ROOT/aux/setup.sh"
echo "setup status $?"
set -o | sort >"$OUT/after"
echo "args after: $*"
for name in die say ensure_venv _caraml_setup; do
    declare -F "$name" >/dev/null && echo "leaked function $name"
done
[ -n "${STAMP+set}${CONSTRAINTS+set}${PIP_SOURCE+set}" ] && echo "leaked variable"
echo "VENV=${VENV:-}"
false
echo "shell alive after a failing command"
'''


def _source(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {**os.environ, "OUT": str(tmp_path), "ROOT": str(ROOT), **env}
    return subprocess.run(["bash", "--norc", "--noprofile", "-i", "-c", CALLER, "caller", "a1", "a2"],
                          env=full, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def test_a_failing_setup_leaves_the_sourcing_shell_alive_and_unchanged(tmp_path):
    proc = _source(tmp_path, {"CARAML_VENV": str(tmp_path / "venv"),
                              "CARAML_WHEELHOUSE": str(tmp_path / "no-such-wheelhouse")})
    assert "setup status 1" in proc.stdout, proc.stdout + proc.stderr
    assert "VENV=\n" in proc.stdout  # nothing of a failed set-up is left
    assert "shell alive after a failing command" in proc.stdout, proc.stdout + proc.stderr
    assert "leaked" not in proc.stdout
    assert "args after: a1 a2" in proc.stdout
    assert (tmp_path / "before").read_text() == (tmp_path / "after").read_text()
    errors = [line for line in proc.stderr.splitlines() if "[caraml setup] ERROR" in line]
    assert len(errors) == 1 and "no-such-wheelhouse is not a folder" in errors[0]
    assert "aux/wheelhouse.py" in errors[0]


def test_a_successful_setup_exports_the_venv_and_keeps_the_options(tmp_path):
    # the checkout's own venv, which aux/run_tests.sh has just set up
    proc = _source(tmp_path, {})
    assert "setup status 0" in proc.stdout, proc.stdout + proc.stderr
    assert "shell alive after a failing command" in proc.stdout
    # the scripts that source it use VENV
    assert f"VENV={os.environ.get('CARAML_VENV', ROOT / '.venv')}" in proc.stdout
    assert "leaked" not in proc.stdout and "args after: a1 a2" in proc.stdout
    assert (tmp_path / "before").read_text() == (tmp_path / "after").read_text()


def test_a_shell_with_errexit_keeps_it_after_a_successful_setup(tmp_path):
    script = 'set -e; source "$ROOT/aux/setup.sh"; case $- in *e*) echo "errexit kept" ;; esac; ' \
             'echo "$VIRTUAL_ENV"; command -v python'
    proc = subprocess.run(["bash", "-c", script], env={**os.environ, "ROOT": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    venv = os.environ.get("CARAML_VENV", str(ROOT / ".venv"))
    assert proc.stdout.splitlines() == ["errexit kept", venv, f"{venv}/bin/python"], proc.stderr


def test_running_it_as_a_script_exits_with_the_error(tmp_path):
    proc = subprocess.run(["bash", str(ROOT / "aux/setup.sh")],
                          env={**os.environ, "CARAML_VENV": str(tmp_path / "venv"),
                               "CARAML_WHEELHOUSE": str(tmp_path / "missing")},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "missing is not a folder" in proc.stderr
    assert not (tmp_path / "venv").exists()
