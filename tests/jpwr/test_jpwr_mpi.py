"""Upstream jpwr's MPI options as its README gives them: --use-mpi names
each rank's files by its MPI rank (power.<rank>.csv, ...) in one --df-out,
which jpwr combine folds into the job's figure; --mpi-ranks measures on
the ranks it names and runs the command unmeasured on the others. The
rank comes from the launcher's variables (as Open MPI's mpirun sets them),
else mpi4py; with a real mpirun where this host has one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jpwr import mpi
from jpwr.aggregate import combine, read_job
from jpwr.cli import main

ROOT = Path(__file__).resolve().parents[2]
GPU = {"power_mw": 0, "energy_mj": 0, "limit_mw": 300_000, "limit_range_mw": [100_000, 400_000]}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A rank's environment: the fake NVML's two GPUs (each draws 60 % of 300 W), no launcher variable."""
    state = tmp_path / "nvml.json"
    if not state.exists():
        state.write_text(json.dumps({"gpus": [{**GPU, "uuid": "GPU-a"}, {**GPU, "uuid": "GPU-b"}]}))
    env = {k: v for k, v in os.environ.items() if k not in (*mpi.LAUNCHER_RANKS, "RANK")}
    return {**env, "CARAML_FAKE_NVML_STATE": str(state), "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "fake_bindings"), str(ROOT)]), **extra}


def _jpwr(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jpwr", *args], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_the_rank_is_the_launchers_else_mpi4pys_else_refused():
    assert mpi.rank({"OMPI_COMM_WORLD_RANK": "3", "SLURM_PROCID": "0"}, mpi=lambda: 9) == \
        (3, "OMPI_COMM_WORLD_RANK")
    assert mpi.rank({"PMI_RANK": "2"}, mpi=lambda: None) == (2, "PMI_RANK")
    assert mpi.rank({"SLURM_PROCID": "5"}, mpi=lambda: None) == (5, "SLURM_PROCID")
    assert mpi.rank({}, mpi=lambda: 4) == (4, "mpi4py")
    with pytest.raises(mpi.NoRank, match="no launcher variable .* and mpi4py is not installed"):
        mpi.rank({"PMI_RANK": ""}, mpi=lambda: None)


def test_mpi_ranks_needs_use_mpi_and_a_rank_nothing_names_is_refused(tmp_path, monkeypatch, capsys):
    marker = tmp_path / "started"
    assert main(["--methods", "estimate", "--mpi-ranks", "0", "touch", str(marker)]) == 2
    assert capsys.readouterr().err.strip() == "jpwr: error: --mpi-ranks needs --use-mpi, as in upstream jpwr"
    for name in (*mpi.LAUNCHER_RANKS, "RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(mpi, "mpi4py_rank", lambda: None)  # as where mpi4py is not installed
    assert main(["--methods", "estimate", "--use-mpi", "touch", str(marker)]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert err.startswith("jpwr: error: --use-mpi: no MPI rank for this process") and not marker.exists()


def test_use_mpi_gathers_each_ranks_files_by_its_rank_and_combine_folds_them(tmp_path):
    """upstream's README: `mpirun -n 2 jpwr --methods pynvml --df-out energy_meas --use-mpi --
    CMD`, each rank started as Open MPI's mpirun starts it (its rank in
    OMPI_COMM_WORLD_RANK), each bound to its own GPU."""
    out = tmp_path / "energy_meas"
    for rank in (0, 1):
        env = _env(tmp_path, OMPI_COMM_WORLD_RANK=str(rank), CUDA_VISIBLE_DEVICES=str(rank))
        done = _jpwr("--methods", "pynvml", "--df-out", str(out), "--use-mpi", "--",
                     sys.executable, "-c", "import time; time.sleep(0.3)", env=env)
        assert done.returncode == 0, done.stderr
    # upstream's names: the rank alone after the stem
    files = (("power", "csv"), ("energy", "csv"), ("additional_pynvml", "csv"), ("meta", "json"))
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{stem}.{rank}.{ext}" for rank in (0, 1) for stem, ext in files)
    assert [json.loads((out / f"meta.{r}.json").read_text())["rank"] for r in (0, 1)] == [0, 1]
    # both runs count (they are different ranks, not a rerun), each GPU once, from its rank
    job = read_job([out])
    assert (len(job.runs), job.superseded) == (2, [])
    table = combine([out])
    assert sorted(zip(table["rank"], table["device"])) == [(0, "gpu0"), (1, "gpu1")]
    assert table["counted"].all() and (table["energy_wh"] > 0).all()
    done = _jpwr("combine", str(out), env=_env(tmp_path))
    assert done.returncode == 0 and "devices=2" in done.stdout, done.stdout + done.stderr


def test_mpi_ranks_measures_on_the_named_ranks_alone(tmp_path):
    out = tmp_path / "energy_meas"
    for rank in (0, 1):
        marker = tmp_path / f"ran{rank}"
        done = _jpwr("--methods", "pynvml", "--df-out", str(out), "--use-mpi", "--mpi-ranks", "0", "--",
                     "sh", "-c", f"touch {marker}; exit 4",
                     env=_env(tmp_path, OMPI_COMM_WORLD_RANK=str(rank)))
        # every rank runs the command and passes its status on
        assert done.returncode == 4 and marker.exists(), done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "additional_pynvml.0.csv", "energy.0.csv", "meta.0.json", "power.0.csv"]


def test_a_df_suffix_names_the_files_as_without_mpi(tmp_path):
    out = tmp_path / "energy_meas"
    done = _jpwr("--methods", "pynvml", "--df-out", str(out), "--use-mpi", "--df-suffix", "_job",
                 "true", env=_env(tmp_path, PMI_RANK="1"))
    assert done.returncode == 0, done.stderr
    [meta] = out.glob("meta*.json")
    assert meta.name.startswith("meta_job.") and json.loads(meta.read_text())["rank"] == 1


MPIRUN = shutil.which("mpirun")


@pytest.mark.skipif(MPIRUN is None, reason="no MPI on this host (apt-get install openmpi-bin)")
def test_upstreams_readme_commands_under_a_real_mpirun(tmp_path):
    out = tmp_path / "energy_meas"
    # Open MPI refuses root and more ranks than cores unless told; the command is upstream's
    flags = ["--allow-run-as-root", "--oversubscribe"] if "Open MPI" in subprocess.run(
        [MPIRUN, "--version"], capture_output=True, text=True).stdout else []
    command = [MPIRUN, *flags, "-n", "2", sys.executable, "-m", "jpwr", "--methods", "pynvml",
               "--df-out", str(out), "--use-mpi"]
    work = [sys.executable, "-c", "import time; time.sleep(0.3)"]
    done = subprocess.run([*command, "--", *work], env=_env(tmp_path), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert {p.name for p in out.glob("energy.*")} == {"energy.0.csv", "energy.1.csv"}
    assert (len(read_job([out]).runs), read_job([out]).superseded) == (2, [])
    only = tmp_path / "only0"
    done = subprocess.run([*command[:-3], "--df-out", str(only), "--use-mpi", "--mpi-ranks", "0", "--",
                           *work], env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert {p.name for p in only.iterdir()} == {"additional_pynvml.0.csv", "energy.0.csv", "meta.0.json",
                                                "power.0.csv"}
