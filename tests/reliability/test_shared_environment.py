"""An environment another checkout made (CARAML_VENV) is never changed by
this checkout's set-up: re-installing the suite from here would make every
other user of that environment run this checkout's code. The set-up
refuses with one line that names both checkouts and what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def foreign_venv(folder: Path, checkout: str) -> Path:
    """A virtual environment whose suite is the editable install of another
    checkout (its dist-info, as pip leaves it), made for an older lock."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    dist = site / "caraml-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: caraml\nVersion: 0.1.0\n")
    (dist / "direct_url.json").write_text(json.dumps({"url": f"file://{checkout}",
                                                      "dir_info": {"editable": True}}))
    (venv / ".caraml-setup-stamp").write_text("made for an older lock\n")
    (venv / ".caraml-extras").write_text("torch,main\n")
    return venv


def snapshot(folder: Path) -> dict[str, tuple[int, float, bytes]]:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns,
                                         p.read_bytes() if p.is_file() and not p.is_symlink() else b"")
            for p in folder.rglob("*")}


def test_an_environment_another_checkout_made_is_never_changed(tmp_path):
    other = "/srv/caraml/another checkout"
    venv = foreign_venv(tmp_path, other.replace(" ", "%20"))
    before = snapshot(venv)
    env = {**os.environ, "CARAML_VENV": str(venv), "CARAML_EXTRAS": "h5"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(["bash", str(ROOT / "aux" / "setup.sh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert snapshot(venv) == before, "the other checkout's environment was changed"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"[caraml setup] ERROR: {venv} is the environment of the checkout {other} "
                               f"and would have to change for this checkout {ROOT.resolve()}"), lines
    assert "unset CARAML_VENV" in lines[0] and f"run from {other}" in lines[0]
    assert "Traceback" not in done.stdout + done.stderr
