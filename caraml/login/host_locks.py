"""Locks that processes of this host take in turn (flock), in the user's
runtime folder ($XDG_RUNTIME_DIR: private to the user, gone at logout) or,
where there is none, in the folder the lock guards: the jobs of ReFrame's
local partitions (which must never measure each other; ReFrame's stage
folder of this host) and JUBE's parse of a script folder (that folder,
where JUBE writes its parse log too). Never under a fixed name in a folder
every user may write, and each lock file goes when it is released.

JUBE 2.5.1 writes the parse log of a `jube run` beside its script
(FOLDER/jube-parse.log) and then moves it into the new run: of two runs of
scripts of one folder started at once, the later move can fail with
"No such file or directory: 'FOLDER/jube-parse.log'" (4 of 30 runs on
dev-cpu, 15 pairs of dry runs). The suite's own `jube run`s (the main
command's, ReFrame's planning) hold the folder's lock while JUBE parses:
until JUBE's banner names the new run, which it prints once the parse log
is in the run's folder, or until `jube run` ends."""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

# the banner `jube run` prints as the run begins, after it moved the parse
# log into the run's folder: `# id: 3`
JUBE_RUN_ID = re.compile(r"^#\s*id:\s*(\d+)\s*$")


def runtime_folder() -> Path | None:
    """The user's runtime folder ($XDG_RUNTIME_DIR), where it is one of the user's own."""
    folder = os.environ.get("XDG_RUNTIME_DIR")
    try:
        return Path(folder) if folder and os.stat(folder).st_uid == os.getuid() else None
    except OSError:
        return None


def lock_file(name: str, guarded: str | Path) -> Path:
    """The lock `name` in the user's runtime folder, else in the folder `guarded`."""
    folder = runtime_folder()
    return folder / f"caraml-{name}.lock" if folder else Path(guarded) / f".caraml-{name}.lock"


def jube_folder_lock(script: str | Path) -> Path:
    """The lock of the folder that holds a JUBE script."""
    folder = Path(script).resolve().parent
    return lock_file("jube-" + hashlib.sha256(str(folder).encode()).hexdigest()[:16], folder)


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


HOLD_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def hold(lock: Path, command: list[str]) -> int:
    """Runs `command` holding `lock`, passing on the stop signals it gets;
    the command's exit status (128+N for a signal N that ended it)."""
    with held(lock):
        child = subprocess.Popen(command)
        for sig in HOLD_SIGNALS:
            signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
        status = child.wait()
    return 128 - status if status < 0 else status


def main(argv: list[str] | None = None) -> int:
    """python -m caraml.login.host_locks hold LOCK -- COMMAND...: COMMAND
    with LOCK held (flock(1) would leave the lock file behind)."""
    parser = argparse.ArgumentParser(prog="python -m caraml.login.host_locks", description=main.__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    holding = sub.add_parser("hold", help="run a command with a lock held")
    holding.add_argument("lock", type=Path)
    holding.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the command to run")
    return hold(args.lock, command)


if __name__ == "__main__":
    sys.exit(main())
