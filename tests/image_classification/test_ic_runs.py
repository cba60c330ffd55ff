"""Real training runs on the CPU: in process, as a script stopped by SIGTERM,
and as two DDP ranks (gloo) under torchrun, one of which gets SIGUSR1."""

import contextlib
import signal
import sys

import pytest

from caraml.node import energy as caraml_energy
from image_classification import image_classification_torch as driver
from tests.driver_runs import Child, count_lines

# The printed figures have 6 significant digits.
ROUNDING = 1e-5
TIMEOUT_S = 300


def check_consistent(lines, global_batch, devices):
    g = lines["global"]
    per_device = global_batch // devices
    assert (int(g["devices"]), int(g["global_batch_size"]), int(g["batch_size_per_device"])) \
        == (devices, global_batch, per_device)
    timed, total = int(g["iterations"]), int(g["iterations_total"])
    assert int(g["samples_total"]) == global_batch * total
    assert int(g["samples_timed"]) == global_batch * timed
    time_s, median_s = float(g["time_per_iteration_s"]), float(g["time_per_iteration_median_s"])
    assert float(g["images_per_s_mean"]) == pytest.approx(global_batch / time_s, rel=ROUNDING)
    assert float(g["images_per_s_median"]) == pytest.approx(global_batch / median_s, rel=ROUNDING)
    assert float(g["images_per_s_per_device"]) == pytest.approx(
        float(g["images_per_s_mean"]) / devices, rel=ROUNDING)
    for rank in range(devices):
        r = lines[f"rank {rank}"]
        rank_time = float(r["time_per_iteration_s"])
        assert float(r["images_per_s_mean"]) == pytest.approx(per_device / rank_time,
                                                              rel=ROUNDING)
        # The global time takes the slowest rank of each iteration.
        assert time_s >= rank_time * (1 - ROUNDING)
    assert f"rank {devices}" not in lines
    return timed, total


def test_single_process_run_prints_consistent_figures(capsys, tiny_run, caraml_lines):
    code = driver.main(tiny_run + ["--global-batch-size", "4", "--train-iters", "3",
                                   "--warmup-iters", "1", "--log-interval", "1",
                                   "--energy-methods", "none"])
    out = capsys.readouterr().out
    assert code == 0
    lines = caraml_lines(out)
    assert check_consistent(lines, global_batch=4, devices=1) == (2, 3)
    g = lines["global"]
    assert (g["model"], g["precision"], g["nodes"]) == ("resnet18", "fp32", "1")
    assert float(g["loss"]) > 0
    assert lines["stop"] == "iteration count 3 reached"
    assert g["images_per_s_mean"] == lines["rank 0"]["images_per_s_mean"]
    assert [ln.split(":")[0] for ln in out.splitlines() if ln.startswith("iteration")] == [
        "iteration 1/3 (warm-up)", "iteration 2/3", "iteration 3/3"]


def test_image_folder_run_goes_on_past_an_epoch(capsys, folder, tiny_run, caraml_lines):
    code = driver.main(tiny_run + ["--data", str(folder), "--global-batch-size", "2",
                                   "--train-iters", "5", "--warmup-iters", "1",
                                   "--num-workers", "1", "--energy-methods", "none"])
    assert code == 0
    lines = caraml_lines(capsys.readouterr().out)
    assert check_consistent(lines, global_batch=2, devices=1) == (4, 5)  # 3 batches an epoch


def test_training_runs_inside_the_energy_measurement(capsys, monkeypatch, tmp_path, tiny_run,
                                                     caraml_lines):
    seen = []

    @contextlib.contextmanager
    def measured(out_dir, rank, methods, interval_ms):
        seen.append((out_dir, rank, list(methods), interval_ms))
        capsys.readouterr()  # what was printed before measuring (the set-up's lines)
        yield
        seen.append(capsys.readouterr().out)  # what was printed while measuring

    monkeypatch.setattr(caraml_energy, "measured", measured)
    energy_dir = str(tmp_path / "energy")
    code = driver.main(tiny_run + ["--image-size", "16", "--global-batch-size", "2",
                                   "--train-iters", "2", "--warmup-iters", "1",
                                   "--log-interval", "1", "--energy-dir", energy_dir,
                                   "--energy-interval-ms", "250"])
    assert code == 0
    assert seen[0] == (energy_dir, 0, ["auto"], 250)
    assert "iteration 1/2 (warm-up)" in seen[1] and "iteration 2/2" in seen[1]
    assert "CARAML" not in seen[1]
    assert caraml_lines(capsys.readouterr().out)["global"]["samples_total"] == "4"


# Energy is measured with jpwr's `auto` methods (an estimate where there is
# no sensor), the default.
OPEN_ENDED = ["--train-iters", "1000000", "--warmup-iters", "1", "--log-interval", "1"]


def energy_files(energy_dir, rank):
    return sorted(p.name for p in energy_dir.glob(f"*_rank{rank}.*"))


def test_sigterm_ends_a_script_run_with_its_summary_and_energy_files(
        repo, tmp_path, tiny_run, caraml_lines):
    cmd = [sys.executable, "image_classification/image_classification_torch.py", *tiny_run,
           "--global-batch-size", "2", *OPEN_ENDED, "--energy-dir", str(tmp_path)]
    with Child(cmd, repo) as run:
        run.wait_for(count_lines("iteration 2/", 1), "second iteration")
        run.proc.send_signal(signal.SIGTERM)
        code, out, err = run.finish(TIMEOUT_S)
    assert code == 0, err
    lines = caraml_lines(out)
    assert lines["stop"] == "signal SIGTERM"
    timed, total = check_consistent(lines, global_batch=2, devices=1)
    assert total >= 2 and timed == total - 1
    assert energy_files(tmp_path, 0)
