"""The driver end to end on the CPU: its summary and how its figures hang
together, the ways a run stops, energy files, the peak for MFU, and bad
input ending in one `CARAML ERROR:` line before training."""

import functools
import itertools
import math
import os
import signal
import subprocess

import pytest
from llm_helpers import PYTHON, REPO, TINY

from caraml.node import driver, provenance
from caraml.row.decide import decide_row
from caraml.row.evidence import Evidence
from llm_training import pretrain_gpt
from llm_training.matmul_rate import MatmulRate
from llm_training.pretrain_gpt import main
from tests.caraml.row_packages import START
from tests.driver_runs import Child, count_lines, parse_caraml

# The summary keys JUBE's patterns and the result table rely on.
SUMMARY_KEYS = [
    "backend", "model_size", "params", "nodes", "devices", "tp", "pp", "dp", "global_batch_size",
    "micro_batch_size", "seq_length", "precision", "iterations", "iterations_total",
    "time_per_iteration_s", "time_per_iteration_median_s", "tokens_per_s",
    "tokens_per_s_per_device", "tflops_per_device", "model_tflops_per_device", "mfu",
    "mfu_unavailable", "peak_tflops", "peak_basis", "peak_key", "peak_windows", "peak_min_tflops",
    "peak_median_tflops", "peak_spread_pct", "tokens_total", "loss",
]
# TINY's model (L 1, h 32, ffn 128, s 16, V 128) for a batch of 4, by hand:
# per token forward 2(4h^2 + 2hf) + 4sh + 2hV = 24,576 + 2,048 + 8,192 = 34,816;
# x 64 tokens x 3 = 6,684,672 model FLOPs. Full recomputation adds each
# layer's forward, 64 x (24,576 + 2,048) = 1,703,936.
TINY_MODEL_FLOPS = 6_684_672
TINY_FULL_RECOMPUTE_FLOPS = 1_703_936


def run(capsys, *flags: str) -> tuple[int, dict, str]:
    code = main([*TINY, *flags])
    out = capsys.readouterr()
    return code, parse_caraml(out.out + out.err), out.out


def close(a: str | float, b: float) -> bool:
    """Equal up to the rounding of printed figures (6 significant digits,
    each off by up to 5e-6, so a ratio of two by up to 1e-5)."""
    return math.isclose(float(a), b, rel_tol=1.1e-5)


def test_summary_figures_hang_together(capsys):
    code, lines, out = run(capsys, "--train-iters", "5", "--warmup-iters", "2",
                           "--energy-methods", "none", "--peak-tflops", "100")
    assert code == 0
    g = lines["global"]
    assert set(SUMMARY_KEYS) <= set(g)
    assert (g["backend"], g["model_size"], g["precision"], g["peak_basis"]) == (
        "torch", "cpu-small", "fp32", "datasheet")
    assert (g["nodes"], g["devices"], g["dp"], g["global_batch_size"], g["seq_length"]) == (
        "1", "1", "1", "4", "16")
    assert (g["iterations"], g["iterations_total"]) == ("3", "5")
    assert g["tokens_total"] == str(5 * 4 * 16)  # warm-up iterations included
    assert g["params"] == "16864"  # V h + L (12h^2 + 13h) + 2h = 4,096 + 12,704 + 64
    t = float(g["time_per_iteration_s"])
    assert close(g["tokens_per_s"], 4 * 16 / t)
    assert close(g["tokens_per_s_median"], 4 * 16 / float(g["time_per_iteration_median_s"]))
    assert g["tokens_timed"] == str(3 * 4 * 16)  # what the timed window's energy paid for
    assert close(g["tokens_per_s_per_device"], 4 * 16 / t)
    assert close(g["model_tflops_per_device"], TINY_MODEL_FLOPS / t / 1e12)
    assert g["tflops_per_device"] == g["model_tflops_per_device"]  # nothing recomputed
    assert close(g["mfu"], float(g["model_tflops_per_device"]) / 100)
    assert 3.0 < float(g["loss"]) < 7.0  # about log(128) = 4.85 at the start
    # the numerics: the first loss of a model that has learnt nothing, every loss finite
    assert abs(float(g["loss_first"]) - math.log(128)) < 0.05 * math.log(128)
    assert "loss_nonfinite_at" not in g and g["skipped_iterations"] == "0"
    spread = [float(g[f"time_per_iteration_{p}_s"]) for p in ("p10", "p50", "p90")]
    assert spread == sorted(spread) and g["time_per_iteration_p50_s"] == g["time_per_iteration_median_s"]
    assert lines["rank 0"]["time_per_iteration_s"] == g["time_per_iteration_s"]
    assert lines["stop"] == "iteration count 5 reached"
    progress = [line for line in out.splitlines() if line.startswith(" iteration")]
    assert [line.split("|")[0].split()[1] for line in progress] == ["1/", "2/", "3/", "4/", "5/"]
    assert "elapsed time per iteration (ms)" in progress[0] and "lm loss" in progress[0]


def test_recomputation_counts_as_device_work_but_not_model_work(capsys):
    code, lines, _ = run(capsys, "--train-iters", "2", "--warmup-iters", "1",
                         "--energy-methods", "none", "--recompute-activations", "full")
    g = lines["global"]
    assert code == 0 and g["recompute"] == "full"
    assert close(float(g["tflops_per_device"]) / float(g["model_tflops_per_device"]),
                 1 + TINY_FULL_RECOMPUTE_FLOPS / TINY_MODEL_FLOPS)
    assert (g["mfu"], g["peak_basis"]) == ("nan", "none")


def test_measured_peak(capsys):
    code, lines, _ = run(capsys, "--train-iters", "2", "--warmup-iters", "1",
                         "--energy-methods", "none", "--peak-tflops", "measure")
    g = lines["global"]
    assert code == 0 and g["peak_basis"] == "measured-matmul"
    assert 0 < float(g["peak_tflops"]) < math.inf
    if g["mfu_unavailable"] == "-":
        assert close(g["mfu"], float(g["model_tflops_per_device"]) / float(g["peak_tflops"]))
    else:  # a host too busy to measure its rate (llm_training/metrics.py)
        assert g["mfu"] == "nan" and g["mfu_unavailable"].startswith("only-")


@pytest.mark.parametrize("flags, calls, peak, windows", [
    # before and after training: the best window of both
    (["--train-iters", "3"], 2, 0.5, 4),
    (["--train-iters", "1000000", "--exit-duration-in-mins", "0.1"], 1, 0.25, 2),  # stopped: once
])
def test_measured_peak_is_the_best_window_before_and_after_a_completed_run(
        capsys, monkeypatch, ticking_budget, flags, calls, peak, windows):
    rates = iter([MatmulRate((0.25, 0.002)), MatmulRate((0.5, 0.1))])
    measured = []
    monkeypatch.setattr(pretrain_gpt.matmul_rate, "measure",
                        lambda *a, **k: measured.append(a) or next(rates))
    code, lines, _ = run(capsys, *flags, "--warmup-iters", "1", "--energy-methods", "none",
                         "--peak-tflops", "measure")
    g = lines["global"]
    assert code == 0 and len(measured) == calls
    assert float(g["peak_tflops"]) == peak and int(g["peak_windows"]) == windows
    assert float(g["peak_min_tflops"]) == 0.002


@pytest.mark.parametrize("foreign, refused", [(47.0, True), (2.0, False), (None, False)])
def test_the_summary_refuses_a_peak_measured_while_other_processes_held_the_host(
        capsys, monkeypatch, foreign, refused):
    """A load that holds every matmul window down alike passes the windows'
    own floors: the contention the loop saw (a fake figure here) refuses
    the peak in the driver's own line, as the row model does."""
    monkeypatch.setattr(pretrain_gpt.matmul_rate, "measure", lambda *a, **k: MatmulRate((0.5, 0.4)))
    monkeypatch.setattr(provenance._RUN_WINDOW, "end", lambda: foreign)
    code, lines, _ = run(capsys, "--train-iters", "3", "--warmup-iters", "1", "--energy-methods", "none",
                         "--peak-tflops", "measure")
    g = lines["global"]
    assert code == 0
    assert lines["host at end"]["foreign_cpu_pct"] == ("-" if foreign is None else f"{foreign:g}")
    if refused:
        assert g["mfu"] == "nan"
        assert g["mfu_unavailable"] == "matmul-rate-measured-on-a-host-whose-CPU-other-processes-used-47%"
    else:
        assert g["mfu_unavailable"] == "-"
        assert close(g["mfu"], float(g["model_tflops_per_device"]) / 0.5)


@pytest.mark.parametrize("flags, seconds", [([], pretrain_gpt.matmul_rate.SECONDS),
                                            (["--peak-seconds", "0.3"], 0.3)])
def test_each_measurement_of_the_peak_lasts_the_seconds_asked(capsys, monkeypatch, flags, seconds):
    asked = []
    monkeypatch.setattr(pretrain_gpt.matmul_rate, "measure",
                        lambda *a, seconds: asked.append(seconds) or MatmulRate((0.5, 0.4)))
    code, _, _ = run(capsys, "--train-iters", "3", "--warmup-iters", "1", "--energy-methods", "none",
                     "--peak-tflops", "measure", *flags)
    assert code == 0 and asked == [seconds, seconds]  # before training and after it


@pytest.fixture
def ticking_budget(monkeypatch):
    """The budget's clock ticks one second per look at it, so where a run
    stops on its budget depends on the loop alone, not on how fast this
    host is."""
    ticks = itertools.count()
    monkeypatch.setattr(driver, "StopCondition",
                        functools.partial(driver.StopCondition, clock=lambda: float(next(ticks))))


def test_wall_clock_budget_stops_the_run(capsys, ticking_budget):
    code, lines, _ = run(capsys, "--train-iters", "1000000", "--warmup-iters", "1",
                         "--energy-methods", "none", "--exit-duration-in-mins", "0.1")
    assert code == 0
    assert lines["stop"] == "wall-clock budget 6 s reached"
    assert 1 <= int(lines["global"]["iterations"]) < int(lines["global"]["iterations_total"]) < 10


def test_a_measurement_window_runs_past_the_iterations_the_data_was_sized_for(capsys):
    """The data is sized to --train-iters; the window (the measure tag)
    goes on past it, the same samples again, and the run ends as planned."""
    code, lines, out = run(capsys, "--train-iters", "3", "--warmup-iters", "1", "--energy-methods", "none",
                           "--min-timed-iterations", "6", "--min-timed-seconds", "0.001")
    assert code == 0, out[-2000:]
    assert lines["stop"] == "measurement window reached: at least 6 timed iterations lasting 0.001 s"
    assert (lines["global"]["iterations"], lines["global"]["iterations_total"]) == ("6", "7")
    assert " iteration        7/      3+ |" in out


def test_energy_files_are_written(capsys, tmp_path):
    code, lines, _ = run(capsys, "--train-iters", "2", "--warmup-iters", "1",
                         "--energy-methods", "estimate", "--energy-dir", str(tmp_path))
    assert code == 0 and "global" in lines
    assert (tmp_path / "energy_rank0.csv").stat().st_size > 0
    assert (tmp_path / "power_rank0.csv").stat().st_size > 0


@pytest.mark.parametrize("flags, message", [
    (["--backend", "megatron", "--device", "cpu"],
     "the megatron backend needs a CUDA or ROCm GPU (megatron-core calls torch.cuda) and this "
     "run is on cpu; use --backend torch"),
    (["--energy-methods", "sensors", "--energy-dir", "e"],
     "--energy-methods: unknown method 'sensors'"),
    (["--global-batch-size", "5"], "global batch size 5 is not divisible by micro-batch size 2"),
])
def test_bad_input_stops_before_training(capsys, flags, message):
    code, lines, out = run(capsys, "--train-iters", "2", "--energy-methods", "none", *flags)
    assert code != 0
    assert message in lines["ERROR"]
    assert "global" not in lines and " iteration" not in out


def test_missing_corpus_is_reported_by_the_data_package(capsys, tmp_path):
    tiny_without_data = [f for f in TINY if f not in ("--synthetic", "--vocab-size", "128")]
    code = main([*tiny_without_data, "--train-iters", "2", "--energy-methods", "none",
                 "--data-path", str(tmp_path / "corpus"), "--vocab-file", str(tmp_path / "v.json"),
                 "--merge-file", str(tmp_path / "m.txt")])
    err = capsys.readouterr().err
    assert code != 0
    assert f"CARAML ERROR: vocab file {tmp_path / 'v.json'} does not exist" in err


def test_bad_flag_gives_one_line_and_exit_status_2():
    p = subprocess.run([PYTHON, "-m", "llm_training.pretrain_gpt", "--model-size", "7B",
                        "--synthetic", "--train-iters", "3"],
                       cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.splitlines() == [
        "CARAML ERROR: unknown model size '7B'; choose one of cpu-small 117M 800M 13B 175B"]


def test_sigterm_mid_run_still_writes_summary_and_energy(tmp_path):
    # As Slurm does, signal the whole process group: data-loader workers too.
    cmd = [PYTHON, "-m", "llm_training.pretrain_gpt", *TINY, "--num-workers", "1",
           "--train-iters", "1000000", "--warmup-iters", "1", "--energy-methods", "estimate",
           "--energy-dir", str(tmp_path)]
    with Child(cmd, REPO) as run:
        run.wait_for(count_lines(" iteration", 3), "third iteration")
        os.killpg(run.proc.pid, signal.SIGTERM)
        code, out, err = run.finish(timeout=60)
    lines = parse_caraml(out)
    assert code == 0, err
    assert lines["stop"] == "signal SIGTERM"
    assert 3 <= int(lines["global"]["iterations_total"]) < 1000000
    assert (tmp_path / "energy_rank0.csv").stat().st_size > 0


def test_a_run_that_diverges_is_a_row_that_is_not_a_measurement_naming_its_loss(capsys):
    """The issue's --lr 1e9: the loss is nan within a few iterations, the run
    ends with an ordinary summary line, and the row model's verdict names
    the loss, whatever its length."""
    code, lines, out = run(capsys, "--train-iters", "6", "--warmup-iters", "1", "--lr", "1e9",
                           "--energy-methods", "none")
    assert code == 0
    g = lines["global"]
    assert g["loss_nonfinite"] == "nan" and int(g["loss_nonfinite_at"]) >= 2
    job_out = "\n".join([START, out, "CARAML job: end=2026-11-24T05:10:00+00:00 status=0", ""])
    row = decide_row("llm", Evidence({"job.out": job_out}, {"nodes": "1", "devices_per_node": "1"}))
    assert row.state == "ok" and not row.measurement
    assert row.not_a_measurement == f"loss nan at iteration {g['loss_nonfinite_at']}"
