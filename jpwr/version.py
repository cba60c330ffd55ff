"""`--version` of the command-line tools: the installed distribution's
version and the commit it was built from, so that a figure can be traced
to the code that produced it."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse


def _distribution() -> importlib.metadata.Distribution | None:
    # the distribution that ships this package, whatever it is called
    names = importlib.metadata.packages_distributions().get(__name__.split(".")[0], [])
    for name in names:
        try:
            return importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _git(folder: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _commit_of(folder: Path) -> str | None:
    commit = _git(folder, "rev-parse", "--short=12", "HEAD")
    if commit is None:
        return None
    changed = _git(folder, "status", "--porcelain", "--untracked-files=no")
    return f"{commit}+changes" if changed else commit


def commit(dist: importlib.metadata.Distribution | None) -> str:
    """The checkout this code runs from (an editable install), else what pip
    recorded of the source (PEP 610 direct_url.json: a VCS commit, or the
    folder it was installed from, if that is still a checkout)."""
    here = _commit_of(Path(__file__).resolve().parent)
    if here is not None:
        return here
    recorded = json.loads(dist.read_text("direct_url.json") or "{}") if dist else {}
    if recorded.get("vcs_info", {}).get("commit_id"):
        return str(recorded["vcs_info"]["commit_id"])[:12]
    url = urlparse(recorded.get("url", ""))
    if url.scheme == "file":
        source = _commit_of(Path(unquote(url.path)))
        if source is not None:
            return source
    return "unknown commit"


def installed() -> dict[str, str | None]:
    """The installed distribution's name and version (None where it is not
    installed as a package) and the commit it was built from."""
    dist = _distribution()
    return {"distribution": dist.metadata["Name"] if dist else None,
            "version": dist.version if dist else None, "commit": commit(dist)}


def version_line(program: str) -> str:
    """'<program> <version> (<distribution>, commit <sha>)'."""
    found = installed()
    if found["version"] is None:
        return f"{program} (not installed as a package), commit {found['commit']}"
    return f"{program} {found['version']} ({found['distribution']}, commit {found['commit']})"


class VersionAction(argparse.Action):
    """`--version` that asks git only when it is given (not on every run)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: object = argparse.SUPPRESS,
                 help: str = "print the version and the commit, then exit") -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[object] | None, option_string: str | None = None) -> None:
        print(version_line(parser.prog.split()[0]))
        parser.exit()
