"""`caraml-compare` end to end: both benchmarks run through the real JUBE on
this host (tags CPU smoke), then the installed command compares the runs,
given twice under two system names. The runs are left without `jube
result`, so the command has to make the CSV tables itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.jube_runs import JubeRun

pytestmark = pytest.mark.jube
COMMAND = Path(sys.executable).parent / "caraml-compare"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="session")
def cpu_runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare_runs")
    outpaths = {}
    for name, script in (("image", "image_classification/image_classification_torch_benchmark.xml"),
                         ("llm", "llm_training/llm_benchmark_nvidia_amd.yaml")):
        run = JubeRun(script, root / name, env=dict(os.environ))
        run.run("CPU", "smoke")
        assert not (run.run_dir / "result" / "result_csv.dat").exists()
        outpaths[name] = run.outpath
    return outpaths


def _compare(runs: dict[str, Path], out: Path, *options: str) -> subprocess.CompletedProcess:
    args = [f"{system}={path}" for system in ("CPU-a", "CPU-b") for path in runs.values()]
    return subprocess.run([str(COMMAND), *args, "--out", str(out), *options], text=True,
                          capture_output=True, timeout=300)


def _references(tmp_path: Path, value: float) -> Path:
    path = tmp_path / f"refs_{value:g}.yaml"
    path.write_text(yaml.safe_dump({"references": [
        {"system": "CPU", "benchmark": "llm", "model": "cpu-small", "figure": "throughput", "value": value,
         "lower": 0.5, "upper": 0.5, "origin": "measured", "source": "test band"}]}))
    return path


def test_the_command_compares_both_benchmarks_of_two_systems(cpu_runs, tmp_path):
    out = tmp_path / "out"
    # a band no CPU reaches from below: every check is "above", and the command passes
    proc = _compare(cpu_runs, out, "--references", str(_references(tmp_path, 1e-6)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    table = pd.read_csv(out / "comparison.csv", keep_default_na=False, na_values=[""])
    assert sorted(zip(table["system"], table["benchmark"])) == \
        [("CPU-a", "image"), ("CPU-a", "llm"), ("CPU-b", "image"), ("CPU-b", "llm")]
    assert set(table["status"]) == {"ok"} and table["best"].all()
    # the same runs under two names: every ratio to the reference system is 1
    assert table["throughput_per_device_ratio"].tolist() == pytest.approx([1.0] * 4)
    assert set(table["energy_source"]) == {"estimated(estimate)"}
    assert set(table["verdict"]) == {"above", "n/a"}
    llm = table[table["benchmark"] == "llm"].iloc[0]
    assert llm["throughput_per_node"] == pytest.approx(llm["throughput"])  # one node
    assert llm["mfu"] > 0

    solution = pd.read_csv(out / "time_to_solution.csv")
    image = solution[(solution["benchmark"] == "image") & solution["case"].str.startswith("one node")].iloc[0]
    row = table[(table["system"] == image["system"]) & (table["benchmark"] == "image")].iloc[0]
    assert image["estimated_time_h"] == pytest.approx(90 * 1_281_167 / row["throughput"] / 3600)
    assert "energy estimated" in image["label"]

    for name in ("bars_image.png", "bars_llm.png", "power_timeline.png"):
        assert (out / name).read_bytes()[:8] == PNG_MAGIC
        assert (out / name).stat().st_size > 5000
    assert len(list(out.glob("heatmap_*.png"))) == 4
    markdown = (out / "comparison_llm.md").read_text()
    assert "| CPU-b | cpu-small fp32 torch |" in markdown and "(estimated)" in markdown

    page = (out / "report.html").read_text()
    # self-contained: every image inline, nothing fetched from elsewhere
    assert page.count('src="data:image/png;base64,') == len(list(out.glob("*.png")))
    assert not re.search(r'(?:src|href)="(?!data:)', page)
    assert "http://" not in page and "https://" not in page and "<link" not in page


def test_a_figure_below_its_band_makes_the_command_fail(cpu_runs, tmp_path):
    proc = _compare(cpu_runs, tmp_path / "out", "--references", str(_references(tmp_path, 1e12)))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    below = [line for line in proc.stdout.splitlines() if line.startswith("BELOW BAND:")]
    assert len(below) == 2 and all("cpu-small fp32 torch batch 4 throughput" in line for line in below)
    verdicts = pd.read_csv(tmp_path / "out" / "verdicts.csv")
    assert set(verdicts["verdict"]) == {"below"}
