"""`caraml-compare` end to end: the LLM benchmark runs through the real JUBE
on this host (tags CPU smoke), its row.json lies in the run's last step
(written by the suite's combine step; where that step does not write one,
the `row_from_table` adapter below makes it from the result table), and the
installed command compares it
with GPU-shaped fixture systems and a failed one; the report is opened in
headless chromium."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.compare import browser
from tests.compare import rowfixtures as fx
from tests.jube_runs import JubeRun

pytestmark = pytest.mark.jube
COMMAND = Path(sys.executable).parent / "caraml-compare"


def _number(value):
    return None if pd.isna(value) else float(value)


def row_from_table(line: pd.Series, work_package: Path) -> dict:
    """One line of the LLM result table in the row contract (caraml-row/1):
    what the row model writes; only the fields this test reads are mapped."""
    devices, nodes = int(line["Devices"]), int(line["Nodes"])
    timed_wh, run_wh = _number(line["TimedEnergy(Wh)"]), _number(line["Energy(Wh)"])
    time_per_iter = float(line["Time/iteration(s)"])
    iterations = float(line["Iterations"])

    def window(wh, work_per_wh, seconds):
        # the table gives the timed window's length only; the whole run's stays unknown (null)
        power = None if seconds is None else wh * 3600 / seconds / devices
        return {"wh": wh, "wh_per_device": wh / devices, "work_per_wh": work_per_wh,
                "mean_power_w_per_device": power, "seconds": seconds, "complete": True, "missing_pct": 0.0}

    tokens = float(line["Tokens/s"])
    return {
        "schema": "caraml-row/1", "benchmark": "llm", "work_package": str(work_package),
        "system": {"name": line["System"], "description": "this host", "device_kind": "cpu",
                   "device_unit": line["DeviceUnit"], "tdp_w": _number(line["TDP/device(W)"]),
                   "nodes": nodes, "devices_per_node": devices // nodes, "devices": devices},
        "config": {"model": line["ModelSize"], "precision": line["Precision"],
                   "global_batch": int(line["GlobalBatchSize"]),
                   "sequence_length": int(line["SequenceLength"]), "image_size": None,
                   "backend": line["Backend"], "tp": int(line["TP"]), "pp": int(line["PP"]),
                   "dp": int(line["DP"]), "micro_batch": int(line["MicroBatch"]),
                   "params": float(line["Params"]), "label": f"batch {line['GlobalBatchSize']}"},
        "throughput": {"unit": "tokens", "per_s": tokens, "per_s_per_device": float(line["Tokens/s/device"]),
                       "per_s_per_node": tokens / nodes, "per_s_median": float(line["Tokens/s(median)"]),
                       "iterations": iterations, "time_per_iteration_s": time_per_iter},
        "mfu": {"value": float(line["MFU"]),
                "model_tflops_per_device": float(line["ModelTFLOP/s/device(MFU-basis)"]),
                "hardware_tflops_per_device": float(line["HardwareTFLOP/s/device(with-recompute)"]),
                "peak_tflops": float(line["ModelTFLOP/s/device(MFU-basis)"]) / float(line["MFU"]),
                "peak_basis": line["PeakSource"], "peak_source": line["PeakSource"]},
        "energy": {"scope": line["EnergyScope"],
                   "estimated": str(line["EnergySource"]).startswith("estimated"),
                   "methods": "estimate", "basis": "integrated", "devices": devices,
                   "headline_window": "timed",
                   "windows": {"run": window(run_wh, float(line["Tokens/Wh"]), None),
                               "timed": window(timed_wh, float(line["TimedTokens/Wh"]),
                                               time_per_iter * iterations)},
                   "by_scope": {line["EnergyScope"]: run_wh}, "by_node": {}},
        "status": {"state": line["Status"], "reason": ""},
        "flags": str(line["Flags"]).split(),
        "provenance": {"commit": line["Commit"], "clean": True, "suite_version": None, "torch": line["Torch"],
                       "cuda": None, "rocm": None, "date": None, "host": None},
    }


@pytest.fixture(scope="session")
def cpu_run(tmp_path_factory) -> Path:
    """The real CPU LLM run, with the row.json of its one configuration in its last step."""
    root = tmp_path_factory.mktemp("compare_runs")
    run = JubeRun("llm_training/llm_benchmark_nvidia_amd.yaml", root / "llm", env=dict(os.environ))
    run.run("CPU", "smoke")
    table = run.table()
    assert len(table) == 1 and table["Status"].tolist() == ["ok"]
    (execute,) = run.work_dirs("execute")
    (last,) = run.work_dirs("combine_energy")
    # where the suite's combine step wrote the row itself, that row is the one compared
    if not (last / "row.json").exists():
        (last / "row.json").write_text(json.dumps(row_from_table(table.iloc[0], execute)))
    return run.outpath


def test_the_command_compares_a_real_cpu_run_with_gpu_shaped_systems(cpu_run, tmp_path):
    out = tmp_path / "out"
    args = [f"CPU={cpu_run}",
            f"GH200={fx.write_run(tmp_path, 'gh200', [fx.gh200()])}",
            f"A100={fx.write_run(tmp_path, 'a100', [fx.a100()])}",
            f"MI250={fx.write_run(tmp_path, 'mi250', [fx.mi250()])}",
            f"H100={fx.write_run(tmp_path, 'h100', [fx.failed()])}"]
    proc = subprocess.run([str(COMMAND), *args, "--out", str(out), "--reference-system", "A100",
                           "--no-references"], text=True, capture_output=True, timeout=300)
    # exit status 1: H100 has no measured row, and the report is written all the same
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "failed system: H100: no measured row (1 rows: failed: CUDA out of memory)" in proc.stdout

    head = pd.read_csv(out / "headline.csv", keep_default_na=False, na_values=[""]).set_index("system")
    cpu = head.loc["CPU"]
    assert (cpu["model"], cpu["peak_basis"], cpu["energy_scope"]) == ("cpu-small", "measured-matmul",
                                                                      "host-estimate")
    assert bool(cpu["energy_estimated"]) and cpu["throughput_per_device"] > 0
    assert head.loc["H100", "status"] == "failed"
    # the CPU's cpu-small row has no like-for-like row of A100: no ratio
    assert pd.isna(cpu["throughput_per_device_ratio"])
    solution = pd.read_csv(out / "time_to_solution.csv")
    assert set(solution.loc[solution["system"] == "CPU", "time_h"]) == {"not representative"}

    # the real run's power samples give its timeline
    assert [p.name for p in out.glob("power_*.png")] == ["power_000_CPU.png"]
    page = browser.load(out / "report.html", tmp_path / "shot.png")
    assert 'id="headline-table-llm"' in page.dom
    assert [line for line in page.log.splitlines() if "CONSOLE" in line] == []
