"""Real runs of the operator driver on the CPU: in process, with generated
data and a damaged or unwritable cache, out of memory, and as two DDP ranks
(gloo) under torchrun."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from operator_benchmark import config, data, fno_training, navier_stokes, problems
from tests.driver_runs import parse_caraml
from tests.gpu_marks import DEVICE

REPO = Path(__file__).resolve().parents[2]
ROUNDING = 1.1e-5  # printed figures have 6 significant digits
TIMEOUT_S = 300
SHORT = ["--train-iters", "4", "--warmup-iters", "1", "--energy-methods", "none",
         "--log-interval", "1", "--device", DEVICE]
NS_SMALL = ["--problem", "navier_stokes2d-small", "--generated-samples", "16"]


def close(text: str, value: float) -> bool:
    return float(text) == pytest.approx(value, rel=ROUNDING)


def check_global(g: dict, devices: int, global_batch: int) -> None:
    """The contract's keys and how they follow from each other."""
    mean = float(g["samples_per_s_mean"])
    assert close(g["samples_per_s_mean"], global_batch / float(g["time_per_iteration_s"]))
    assert close(g["samples_per_s_median"],
                 global_batch / float(g["time_per_iteration_median_s"]))
    assert close(g["samples_per_s_per_device"], mean / devices)
    assert close(g["epoch_s"], int(g["samples_per_epoch"]) / mean)
    assert close(g["tflops_counted_per_device"],
                 int(g["flops_counted_per_sample"]) * mean / devices / 1e12)
    assert int(g["flops_counted_per_sample"]) > 0
    assert g["flops_note"] == "counted-excludes-fft-complex-as-real"
    assert (int(g["devices"]), int(g["global_batch_size"]), int(g["batch_size_per_device"])) \
        == (devices, global_batch, global_batch // devices)
    assert int(g["samples_total"]) == global_batch * int(g["iterations_total"])
    assert int(g["samples_timed"]) == global_batch * int(g["iterations"])
    assert float(g["memory_max_allocated_gib"]) > 0


def test_a_synthetic_run_prints_the_contracts_figures(capsys):
    code = fno_training.main(["--problem", "pic2d-small", *SHORT])
    out = capsys.readouterr().out
    assert code == 0
    lines = parse_caraml(out)
    g = lines["global"]
    check_global(g, devices=1, global_batch=4)
    assert (g["problem"], g["model"], g["data"], g["precision"], g["compile"]) == (
        "pic2d-small", "FNO", "synthetic", "fp32", "none")
    assert g["samples_per_epoch"] == str(config.SYNTHETIC_EPOCH)
    assert (g["iterations"], g["iterations_total"]) == ("3", "4")
    assert lines["rank 0"]["samples_per_s_mean"] == g["samples_per_s_mean"]
    assert "FNO on pic2d-small (3 -> 3 fields on 32x32" in out


def test_a_generated_run_makes_the_cache_and_a_damaged_one_is_made_again(
        capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(navier_stokes.CACHE_VARIABLE, str(tmp_path))
    assert fno_training.main([*NS_SMALL, *SHORT]) == 0
    first = parse_caraml(capsys.readouterr().out)["global"]
    assert (first["data"], first["samples_per_epoch"]) == ("generated", "16")
    (cache,) = tmp_path.glob("*.pt")
    cache.write_bytes(cache.read_bytes()[:-10])  # cut short
    assert fno_training.main([*NS_SMALL, *SHORT]) == 0
    out = capsys.readouterr().out
    warnings = [line for line in out.splitlines() if line.startswith("CARAML warning:")]
    assert len(warnings) == 1 and "does not match its checksum" in warnings[0]
    check_global(parse_caraml(out)["global"], devices=1, global_batch=4)
    assert not isinstance(navier_stokes.read(cache), str)


def test_a_cache_that_cannot_be_written_fails_the_run_in_one_line(capsys, monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(navier_stokes.CACHE_VARIABLE, str(blocker / "cache"))
    assert fno_training.main([*NS_SMALL, *SHORT]) == 2
    captured = capsys.readouterr()
    (error,) = captured.err.splitlines()
    assert error.startswith("CARAML ERROR: generated-data cache ")
    assert navier_stokes.CACHE_VARIABLE in error
    assert "global" not in parse_caraml(captured.out)


def test_out_of_memory_names_the_batch_per_device_and_what_to_lower(capsys, monkeypatch):
    # the device boundary: the allocation of the batches fails as a full device's would
    def full_device(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(data, "synthetic", full_device)
    assert fno_training.main(["--problem", "rbc3d-small", "--global-batch-size", "8",
                              *SHORT]) == 2
    (error,) = capsys.readouterr().err.splitlines()
    assert error.startswith("CARAML ERROR: out of memory at 8 samples per device on ")
    assert "rbc3d-small on 16x16x8 does not fit; lower the global batch size" in error


def test_a_batch_too_large_for_the_cpu_allocator_is_one_line_not_a_traceback(capsys):
    # the real allocator: 10^8 samples of rbc2d-small ask for terabytes at once
    assert fno_training.main(["--problem", "rbc2d-small", "--global-batch-size", "100000000",
                              *SHORT[:-2], "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["CARAML ERROR: out of memory at 100000000 samples per device on cpu: "
                                "rbc2d-small on 64x16 does not fit; lower the global batch size; use "
                                "more devices or a smaller problem"], err


def test_two_ddp_ranks_share_one_generated_cache_and_report_the_job(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "operator_benchmark.fno_training", *NS_SMALL, *SHORT]
    env = {**__import__("os").environ, navier_stokes.CACHE_VARIABLE: str(tmp_path)}
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    assert p.returncode == 0, p.stderr
    lines = parse_caraml(p.stdout)
    g = lines["global"]
    check_global(g, devices=2, global_batch=4)
    assert float(g["time_per_iteration_s"]) >= max(
        float(lines[f"rank {r}"]["time_per_iteration_s"]) for r in (0, 1)) * (1 - ROUNDING)
    assert "rank 2" not in lines
    assert len(list(tmp_path.glob("*.pt"))) == len(list(tmp_path.glob("*.pt.sha256"))) == 1
    assert not list(tmp_path.glob("*.partial"))


def test_generated_samples_too_few_for_the_ranks_are_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv(navier_stokes.CACHE_VARIABLE, str(tmp_path))
    assert fno_training.main(["--problem", "navier_stokes2d-small", "--generated-samples", "3",
                              *SHORT]) == 2
    (error,) = capsys.readouterr().err.splitlines()
    assert "3 samples leave 3 for each of 1 device(s): fewer than a batch of 4" in error
    assert problems.get("navier_stokes2d-small").grid == (32, 32)


@pytest.mark.filterwarnings("ignore::UserWarning")  # inductor: no code for complex operators
def test_a_compiled_bf16_run_trains_and_reports_its_mode(capsys):
    flags = list(SHORT)
    flags[flags.index("--warmup-iters") + 1] = "2"  # compiled in the first, not timed
    code = fno_training.main(["--problem", "pic1d-small", "--compile", "default",
                              "--precision", "bf16", *flags])
    lines = parse_caraml(capsys.readouterr().out)
    assert code == 0
    g = lines["global"]
    assert (g["compile"], g["precision"], g["iterations"]) == ("default", "bf16", "2")
    check_global(g, devices=1, global_batch=4)
    assert float(g["loss"]) > 0
