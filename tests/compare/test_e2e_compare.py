"""`caraml-compare` end to end: the LLM benchmark runs through the real JUBE
on this host (tags CPU smoke), the row model writes its row.json in the
run's last step, and the installed command compares it with GPU-shaped
fixture systems and a failed one; the report is opened in headless
chromium."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.compare import browser
from tests.compare import rowfixtures as fx

pytestmark = pytest.mark.jube
COMMAND = Path(sys.executable).parent / "caraml-compare"


@pytest.fixture(scope="session")
def cpu_run(llm_cpu_smoke) -> Path:
    """The real CPU LLM run, with the row.json of its one configuration in its last step."""
    run = llm_cpu_smoke
    table = run.table()
    assert len(table) == 1 and table["Status"].tolist() == ["ok"]
    (last,) = run.work_dirs("combine_energy")
    assert json.loads((last / "row.json").read_text())["state"] == "ok"
    return run.outpath


def test_the_command_compares_a_real_cpu_run_with_gpu_shaped_systems(cpu_run, tmp_path):
    out = tmp_path / "out"
    args = [f"CPU={cpu_run}",
            f"GH200={fx.write_run(tmp_path, 'gh200', [fx.gh200()])}",
            f"A100={fx.write_run(tmp_path, 'a100', [fx.a100()])}",
            f"MI250={fx.write_run(tmp_path, 'mi250', [fx.mi250()])}",
            f"H100={fx.write_run(tmp_path, 'h100', [fx.failed()])}"]
    # the GPU-shaped rows are written by hand: unaudited, ranked where accepted; the real run is audited
    proc = subprocess.run([str(COMMAND), *args, "--out", str(out), "--reference-system", "A100",
                           "--no-references", "--accept-unaudited"], text=True, capture_output=True,
                          timeout=300)
    # exit status 1: H100 has no measured row, and the report is written all the same
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "failed benchmark: H100 llm: no measured row (1 rows: failed: CUDA out of memory)" in proc.stdout
    # the CPU smoke run (a few timed iterations) is shown, marked, and counts as no measurement
    assert "failed benchmark: CPU llm: no measured row (1 rows: not a measurement (" in proc.stdout

    head = pd.read_csv(out / "headline.csv", keep_default_na=False, na_values=[""]).set_index("system")
    cpu = head.loc["CPU"]
    assert (cpu["model"], cpu["energy_scope"]) == ("cpu-small", "host-estimate")
    # the measured matmul rate divides, or (a host too busy to measure it) the row says why not
    assert cpu["peak_basis"] == "measured-matmul" or "mfu-not-available(" in cpu["flags"]
    assert bool(cpu["energy_estimated"]) and cpu["per_s_per_device"] > 0
    assert (cpu["audit"], head.loc["A100", "audit"]) == ("audited", "unaudited")
    assert head.loc["H100", "state"] == "failed"
    # the CPU's cpu-small row has no like-for-like row of A100: no ratio
    assert pd.isna(cpu["per_s_per_device_ratio"])
    # a smoke run times a few iterations: the verdict names its length (not its loss, which a run that
    # short cannot be expected to lower), and the report says the row's own why, never its own
    assert not cpu["measurement"] and cpu["not_a_measurement"].endswith("a measurement needs 20 and 60 s")
    assert f"not a measurement: CPU llm {cpu['like']}: {cpu['not_a_measurement']}" in proc.stdout
    # a smoke run is never extrapolated to a time to solution
    solution = pd.read_csv(out / "time_to_solution.csv")
    assert "CPU" not in set(solution["system"]) and "A100" in set(solution["system"])

    # the real run's power samples give its timeline
    assert [p.name for p in out.glob("power_*.png")] == ["power_000_CPU.png"]
    page = browser.load(out / "report.html", tmp_path / "shot.png")
    assert 'id="headline-table-llm"' in page.dom
    assert [line for line in page.log.splitlines() if "CONSOLE" in line] == []
