"""Locks that processes of this host take in turn (flock), in the user's
runtime folder: the jobs of ReFrame's local partitions (which must never
measure each other) and JUBE's parse of a script folder.

JUBE 2.5.1 writes the parse log of a `jube run` beside its script
(FOLDER/jube-parse.log) and then moves it into the new run: of two runs of
scripts of one folder started at once, the later move can fail with
"No such file or directory: 'FOLDER/jube-parse.log'" (4 of 30 runs on
dev-cpu, 15 pairs of dry runs). The suite's own `jube run`s (the main
command's, ReFrame's planning) hold the folder's lock while JUBE parses:
until JUBE's banner names the new run, which it prints once the parse log
is in the run's folder, or until `jube run` ends."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

# the banner `jube run` prints as the run begins, after it moved the parse
# log into the run's folder: `# id: 3`
JUBE_RUN_ID = re.compile(r"^#\s*id:\s*(\d+)\s*$")


def lock_file(name: str) -> Path:
    folder = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(folder) / f"caraml-{name}-{os.getuid()}.lock"


def jube_folder_lock(script: str | Path) -> Path:
    """The lock of the folder that holds a JUBE script."""
    folder = str(Path(script).resolve().parent)
    return lock_file("jube-" + hashlib.sha256(folder.encode()).hexdigest()[:16])


@contextmanager
def held(lock: Path) -> Iterator[Callable[[], None]]:
    """Waits for the lock and holds it for the block, or until the block
    calls the release it is given (released when the process ends, whatever
    ends it). The file goes when it is released, so that no lock outlives
    its run on a shared login node (only a process killed while holding it
    leaves it, for the next taker to remove)."""
    while True:
        # a descriptor, not a file object: the lock is all it is for
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            # a holder that released it removed the file this descriptor may
            # have opened: then it locks nothing, and the lock is taken anew
            mine = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            mine = False
        if mine:
            break
        os.close(fd)
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            lock.unlink(missing_ok=True)  # while held: a waiter then sees it gone
            fcntl.flock(fd, fcntl.LOCK_UN)

    try:
        yield release
    finally:
        release()
        os.close(fd)


def jube_script(command: list[str]) -> str:
    """The script of a `jube run SCRIPT ...` command line."""
    return command[command.index("run") + 1]


def run_jube(command: list[str], *, timeout: float, env: Mapping[str, str] | None = None,
             cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """`jube run` (command), its script's folder lock held while JUBE parses,
    its output captured as text; subprocess.TimeoutExpired (JUBE killed)
    after timeout seconds."""
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}  # the banner comes at once
    killed = threading.Event()
    with held(jube_folder_lock(Path(cwd or ".") / jube_script(command))) as release:
        with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, errors="replace") as proc:
            stdout, stderr = proc.stdout, proc.stderr
            assert stdout is not None and stderr is not None  # both PIPE
            # stderr is read aside: JUBE blocks once a pipe nobody reads is full
            err: list[str] = []
            drain = threading.Thread(target=lambda: err.append(stderr.read()), daemon=True)
            drain.start()

            def kill() -> None:
                killed.set()
                proc.kill()
            timer = threading.Timer(timeout, kill)
            timer.start()
            out = []
            try:
                for line in stdout:
                    out.append(line)
                    if JUBE_RUN_ID.match(line):
                        release()
                proc.wait()
            finally:
                timer.cancel()
            drain.join()
    if killed.is_set():
        raise subprocess.TimeoutExpired(command, timeout, "".join(out), "".join(err))
    return subprocess.CompletedProcess(command, proc.returncode, "".join(out), "".join(err))
