"""What the two-node tests share: a benchmark run through JUBE onto the
two-node cluster (tests/slurm_cluster.py, NamespacedSlurm), waiting for a
running job to reach a line, and the combined energy table of a run."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pandas as pd

from tests.jube_runs import JubeRun

IC_SCRIPT = "image_classification/image_classification_torch_benchmark.xml"
LLM_SCRIPT = "llm_training/llm_benchmark_nvidia_amd.yaml"
# the LLM driver's progress line, every 5 iterations (log_interval)
LLM_PROGRESS = re.compile(r"^ iteration +5/ +(\d+) ", re.MULTILINE)


def jube_run(tmp_path: Path, script: str, cluster) -> JubeRun:
    return JubeRun(script, tmp_path / "run", env=cluster.env)


def wait_for_line(path: Path, pattern: re.Pattern, timeout_s: float = 300) -> re.Match:
    """The first match of pattern in a file that a running job writes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text() if path.is_file() else ""
        found = pattern.search(text)
        if found:
            return found
        time.sleep(0.2)
    raise TimeoutError(f"{path} has no line matching {pattern.pattern!r} after {timeout_s:.0f} s")


def job_id(work: Path) -> str:
    return wait_for_line(work / "job.out", re.compile(r"^CARAML job: start=\S+ host=\S+ job_id=(\d+)",
                                                      re.MULTILINE)).group(1)


def combined_energy(run: JubeRun) -> pd.DataFrame:
    """jpwr combine's table of the run's first work package (one row per
    host, method and device; `counted` says which make up the total)."""
    [work] = run.work_dirs("combine_energy")[:1]
    return pd.read_csv(work / "energy_summary.csv")


def submitted_row(table: pd.DataFrame) -> pd.Series:
    """The LLM row of the job that ran. Without `smoke` the CPU sweep also
    asks for global batch 4, which two devices with cpu-small's micro-batch
    of 4 cannot split: that package is refused before submission."""
    refused = table["Error"].fillna("").str.contains("global batch size 4 is not divisible")
    assert refused.sum() == len(table) - 1, table.to_dict("records")
    return table[~refused].iloc[0]


def rank_processes(cluster, node: str, module: str) -> list[int]:
    """The training processes (not the launcher) of a benchmark on one node."""
    found = []
    for pid in cluster.pids(node):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv]
        if module in words and "torch.distributed.run" not in words:
            found.append(pid)
    return found


def kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
