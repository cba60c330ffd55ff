"""Small tmpfs mounts that fill up on purpose (root needed; where a mount
cannot be made the test is skipped with the reason)."""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(where: Path, size: str = "32k", inodes: int | None = None) -> Iterator[Path]:
    """A tmpfs of `size` at `where` (holding at most `inodes` files where given)."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(disk: Path, leave: int = 0) -> Path:
    """Fills `disk` up to `leave` bytes free (0: full); returns the filler,
    whose removal frees the space again."""
    filler = disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as f:
        while True:
            stat = os.statvfs(disk)
            room = stat.f_bavail * stat.f_frsize - leave
            if room <= 0:
                break
            f.write(b"x" * min(room, 1 << 16))
            f.flush()
    return filler


def fill_inodes(disk: Path) -> Path:
    """Makes empty files in `disk` until it takes no new file (a full disk or
    a quota of files: appending to a file still works, creating one does not);
    returns their folder, whose removal frees them again."""
    folder = disk / "inode-filler"
    folder.mkdir()
    with contextlib.suppress(OSError):
        for n in itertools.count():
            (folder / str(n)).touch()
    return folder
