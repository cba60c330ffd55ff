"""caraml-compare's output on a shared machine: a link someone placed in
OUT is replaced, never written through (a file elsewhere overwritten), and
the processes that draw its power timelines end with it, whatever ends it
(SIGKILL too: no code of caraml-compare runs then)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from caraml.compare import cli, comparison
from tests.compare import rowfixtures as fx

ROOT = Path(__file__).resolve().parents[2]


def test_links_placed_in_the_output_folder_are_replaced_not_written_through(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victims = {}
    for name in ("report.html", "comparison.csv", "decision.json", "summary.md"):
        victim = tmp_path / "elsewhere" / name
        victim.parent.mkdir(exist_ok=True)
        victim.write_text("another user's file\n")
        (out / name).symlink_to(victim)
        victims[name] = victim
    assert cli.main([*fx.demo(tmp_path / "runs"), "--out", str(out), "--reference-system", "A100"]) \
        == comparison.SYSTEM_FAILED
    for name, victim in victims.items():
        assert victim.read_text() == "another user's file\n", f"{name} was written through its link"
        assert not (out / name).is_symlink() and (out / name).stat().st_size > 0
    assert "<html" in (out / "report.html").read_text()
    assert not list(out.glob(".caraml-compare-*")), "the folder it wrote into was left"


def _children(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(child) for child in (task / "children").read_text().split()}
        except OSError:
            pass
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for its new parent to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_the_drawing_workers_end_with_a_killed_caraml_compare(tmp_path):
    args = [*fx.many_systems(tmp_path / "runs", 12, power=True), "--out", str(tmp_path / "out"),
            "--no-references"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    main = "import sys; from caraml.compare import cli; sys.exit(cli.main(sys.argv[1:]))"
    command = [sys.executable, "-c", main, *args]
    with subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL) as compare:
        # its pool draws the 12 power timelines on this host's CPUs (two or more: the test machine's)
        deadline = time.monotonic() + 600
        while not (workers := _children(compare.pid)):
            assert compare.poll() is None, "caraml-compare ended before its drawing workers were seen"
            assert time.monotonic() < deadline, "no drawing worker within 600 s"
            time.sleep(0.01)
        compare.send_signal(signal.SIGKILL)
        compare.wait()
    deadline = time.monotonic() + 60
    try:
        while left := [pid for pid in workers if _running(pid)]:
            assert time.monotonic() < deadline, f"drawing workers {left} outlived caraml-compare"
            time.sleep(0.1)
    finally:
        for pid in workers:  # a failing run leaves none behind on the test machine either
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
