"""Running a benchmark through the real JUBE, as a user would, into a
temporary output folder, and reading its full table (the CSV the row model
writes, caraml/row/full_table.py) and what a plain `jube result` printed."""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from caraml.login.host_locks import run_jube

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class JubeRun:
    script: str
    outpath: Path
    env: dict[str, str] | None = None
    # what the last plain `jube result RUN -i last` printed (table())
    shown: str = ""

    def jube(self, *args: str, timeout: float = 600) -> str:
        command = ["jube", *args]
        if args[0] == "run":  # another test worker may run a script of the same folder
            proc = run_jube(command, cwd=ROOT, env=self.env, timeout=timeout)
        else:
            proc = subprocess.run(command, cwd=ROOT, env=self.env, text=True, capture_output=True,
                                  timeout=timeout)
        if proc.returncode != 0:
            raise AssertionError(f"jube {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc.stdout

    def run(self, *tags: str) -> str:
        return self.jube("run", self.script, "--hide-animation", "-o", str(self.outpath), "--tag", *tags)

    def run_through_slurm(self, slurm, *tags: str) -> pd.DataFrame:
        """Submits with sbatch, waits for the queue to empty, and returns the
        table once JUBE says every work package is finished."""
        self.run(*tags, "slurm")
        return self.after_slurm(slurm)

    def after_slurm(self, slurm) -> pd.DataFrame:
        """The table of a run submitted with sbatch, once the queue is empty
        and JUBE says every work package is finished."""
        slurm.wait_for_jobs(timeout_s=600)
        table = self.table()
        assert self.status() == "FINISHED"
        # the jobs really ran under Slurm, not on this shell
        for work in self.work_dirs("execute"):
            assert "job_id=none" not in (work / "job.out").read_text()
        return table

    def status(self) -> str:
        return self.jube("status", str(self.outpath), "-i", "last").strip()

    def table(self) -> pd.DataFrame:
        self.jube("continue", str(self.outpath), "-i", "last")
        self.shown = self.jube("result", str(self.outpath), "-i", "last")
        return self.csv()

    def csv(self) -> pd.DataFrame:
        """The full table, as the last `jube result` of the run wrote it."""
        return pd.read_csv(self.run_dir / "result" / "result_csv.dat", keep_default_na=False,
                           na_values=[""])

    def shown_tables(self) -> list[str]:
        """The tables the last plain `jube result` printed, each of its
        lines no longer than 160 characters (the README's promise)."""
        lines = self.shown.splitlines()
        assert max(map(len, lines)) <= 160, self.shown
        return [line[:-1] for line in lines if line.endswith(":") and not line.startswith("|")]

    @property
    def run_dir(self) -> Path:
        return sorted(p for p in self.outpath.iterdir() if p.is_dir())[-1]

    def work_dirs(self, step: str) -> list[Path]:
        return sorted(self.run_dir.glob(f"*_{step}/work"))

    def combine_again(self, execute_work: Path) -> None:
        """Runs the combine step of one execute work package again with the
        command JUBE recorded for it, its exported variables and its output
        file: what JUBE runs, after the test changed what the job left."""
        root = ET.parse(self.run_dir / "workpackages.xml").getroot()
        for combine in self.work_dirs("combine_energy"):
            if (combine / "execute").resolve() == execute_work.resolve():
                break
        else:
            raise AssertionError(f"no combine step follows {execute_work}")
        wp_id = str(int(combine.parent.name.split("_")[0]))
        [params] = [{p.get("name"): p.findtext("selection") for p in wp.iter("parameter")}
                    for wp in root.iter("workpackage") if wp.get("id") == wp_id]
        # what JUBE exports to the step (platform.xml's export="true" parameters)
        exported = {name: params[name] for name in ("CARAML_ROOT", "CARAML_RUNDIR", "CARAML_BENCHMARK_HOME")}
        with open(combine / "stdout", "w") as out:
            subprocess.run(["bash", "-c", params["combine_cmd"]], cwd=combine, check=True, timeout=300,
                           stdout=out, env={**(self.env or os.environ), **exported})
