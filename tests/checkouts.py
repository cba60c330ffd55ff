"""Copies of this checkout for tests that run the suite from another path
(a name a shell would split, or one that hides a command), with an
environment that sees the suite's own .venv without ever writing to it."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from caraml.benchmarks import get
from tests.jube_runs import ROOT, JubeRun

# A checkout name JUBE itself can run: every character here that a shell or
# Python would act on runs a command (touch PWNED...) if the name reached
# their source unquoted.
RUNNABLE = ("it's ;touch PWNED1;(x) & touch PWNED2 | y * #h "
            "'+str(__import__('os').system('touch PWNED3'))+'")


def commands_ran(top: Path) -> list[Path]:
    """What a command hidden in a RUNNABLE path under top left."""
    return list(top.rglob("PWNED*"))


# The jobs of the main command's `CPU smoke` run, by benchmark: the image
# and LLM smoke runs are one job each, the operator benchmark trains its two
# default problems (rbc2d-small, rbc3d-small)
SMOKE_JOBS = {"image": 1, "llm": 1, "operator": 2}


def copy_tree(dest: Path) -> Path:
    """The working tree's files (tracked and new, not ignored ones such as
    .venv) at dest."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def venv_view(target: Path) -> None:
    """A virtual environment of its own that sees the suite's .venv (a .pth
    line adds its site-packages) and carries its set-up stamp and make-up.
    Should setup.sh still decide to install, it installs into this one: the
    shared environment is never written to."""
    real = ROOT / ".venv"
    base = subprocess.run([str(real / "bin" / "python"), "-c", "import sys; print(sys._base_executable)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([base, "-m", "venv", "--without-pip", str(target)], check=True)
    shared = next((real / "lib").glob("python3*/site-packages"))
    own = next((target / "lib").glob("python3*/site-packages"))
    (own / "_caraml_shared_venv.pth").write_text(f"import site; site.addsitedir({str(shared)!r})\n")
    for record in (".caraml-setup-stamp", ".caraml-extras"):
        shutil.copy(real / record, target / record)


def checkout_with_venv(dest: Path) -> Path:
    """A copy of the checkout at dest with an environment of its own (venv_view)."""
    copy_tree(dest)
    venv_view(dest / ".venv")
    return dest


# The main command asks Slurm about its jobs every CARAML_POLL_S seconds
# (30 by default, kind to a centre's controller); the tests' own cluster
# answers at once, so the tests ask every 2 s and see a job's end sooner
TEST_POLL = {"CARAML_POLL_S": "2"}


def main_command(checkout: Path, *tags: str, env: dict[str, str] | None = None,
                 timeout: float = 1200) -> subprocess.CompletedProcess:
    """The README's main command, run in that checkout."""
    return subprocess.run(["bash", str(checkout / "aux" / "run_benchmarks.sh"), *tags],
                          cwd=checkout, env={**os.environ, **TEST_POLL, **(env or {})}, text=True,
                          capture_output=True, timeout=timeout)


@dataclass
class MainCommand:
    """The main command, run in a checkout: what it printed, and its runs."""
    checkout: Path
    done: subprocess.CompletedProcess

    @property
    def out(self) -> str:
        return self.done.stdout + self.done.stderr

    def run_of(self, benchmark: str, env: dict[str, str] | None = None) -> JubeRun:
        """The run the main command made of that benchmark."""
        entry = get(benchmark)
        return JubeRun(str(self.checkout / entry.script), self.checkout / entry.outpath, env=env)


def check_ran_from_the_copy(run: JubeRun, checkout: Path) -> None:
    """Each job of the run ran from the copy, its path quoted, and its
    energy was combined into an ok row."""
    works = run.work_dirs("execute")
    assert works and len(works) == len(run.work_dirs("combine_energy"))
    for work in works:
        assert f"CARAML_ROOT={checkout}" not in (work / "job.sh").read_text()  # quoted, not raw
        assert "CARAML job: end=" in (work / "job.out").read_text()
    for combine in run.work_dirs("combine_energy"):
        assert "jpwr-summary:" in (combine / "jpwr.out").read_text()
        assert "CARAML row: state=ok " in (combine / "stdout").read_text()
