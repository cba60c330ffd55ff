"""What both drivers must do alike, tested on both through their command
lines (real processes, real gloo process groups under torchrun): timing
without the warm-up, one signalled rank stopping all and named, an empty
run, and bad input ending in one line with exit status 2 before training."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.driver_runs import Child, count_lines, parse_caraml, worker_with_rank
from tests.gpu_marks import DEVICE

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300
ROUNDING = 1.1e-5  # printed figures have 6 significant digits


@dataclass(frozen=True)
class Driver:
    module: str
    tiny: tuple[str, ...]  # a small run: global batch 4, a progress line per iteration
    progress: str  # how its progress lines start
    work: str  # the key of the rate in the global and the rank lines
    per_sample: int  # work items per sample (tokens per sequence)


IMAGES = Driver("image_classification.image_classification_torch",
                ("--model", "resnet18", "--image-size", "32", "--num-classes", "10",
                 "--global-batch-size", "4", "--num-workers", "0", "--log-interval", "1",
                 "--device", DEVICE),
                "iteration ", "images_per_s_mean", 1)
GPT = Driver("llm_training.pretrain_gpt",
             ("--model-size", "cpu-small", "--num-layers", "1", "--hidden-size", "32",
              "--num-attention-heads", "2", "--seq-length", "16", "--synthetic",
              "--vocab-size", "128", "--micro-batch-size", "2", "--global-batch-size", "4",
              "--num-workers", "0", "--log-interval", "1", "--device", DEVICE),
             " iteration ", "tokens_per_s", 16)
OPERATOR = Driver("operator_benchmark.fno_training",
                  ("--problem", "rbc2d-small", "--global-batch-size", "4", "--log-interval", "1",
                   "--device", DEVICE),
                  "iteration ", "samples_per_s_mean", 1)
DRIVERS = pytest.mark.parametrize("drv", [IMAGES, GPT, OPERATOR], ids=["images", "gpt", "operator"])


def command(drv: Driver, *flags: str, ranks: int = 1) -> list[str]:
    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc-per-node", str(ranks)] if ranks > 1 else [sys.executable])
    return [*launcher, "-m", drv.module, *drv.tiny, *flags]


def run(drv: Driver, *flags: str, ranks: int = 1) -> tuple[int, dict, str, str]:
    p = subprocess.run(command(drv, *flags, ranks=ranks), cwd=REPO, capture_output=True,
                       text=True, timeout=TIMEOUT_S)
    return p.returncode, parse_caraml(p.stdout + p.stderr), p.stdout, p.stderr


def close(a: str, b: float) -> bool:
    return float(a) == pytest.approx(b, rel=ROUNDING)


@DRIVERS
def test_warmup_is_run_but_not_timed_and_the_rate_is_the_batch_over_the_time(drv):
    code, lines, out, err = run(drv, "--train-iters", "4", "--warmup-iters", "2",
                                "--energy-methods", "none")
    assert code == 0, err
    g = lines["global"]
    assert (g["iterations"], g["iterations_total"]) == ("2", "4")
    assert lines["stop"] == "iteration count 4 reached"
    assert close(g[drv.work], 4 * drv.per_sample / float(g["time_per_iteration_s"]))
    assert sum(line.startswith(drv.progress) for line in out.splitlines()) == 4


@pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists(),
                    reason="needs /proc/<pid>/task/<tid>/children to find a worker")
@DRIVERS
def test_one_signalled_rank_stops_both_after_the_same_iteration_and_is_named(drv, tmp_path):
    cmd = command(drv, "--train-iters", "1000000", "--warmup-iters", "2",
                  "--energy-methods", "estimate", "--energy-dir", str(tmp_path), ranks=2)
    with Child(cmd, REPO) as child:
        child.wait_for(count_lines(drv.progress, 4), "fourth iteration")
        # Rank 1 alone is told to stop; rank 0 must follow at the same iteration.
        os.kill(worker_with_rank(child.proc.pid, 1), signal.SIGUSR1)
        code, out, err = child.finish(TIMEOUT_S)
    assert code == 0, err
    lines = parse_caraml(out)
    assert lines["stop"] == "signal SIGUSR1 on rank 1"
    g = lines["global"]
    assert int(g["iterations"]) == int(g["iterations_total"]) - 2 >= 2
    assert (g["devices"], g["nodes"]) == ("2", "1")
    # the job is as slow as its slowest rank in each iteration
    rank_times = [float(lines[f"rank {r}"]["time_per_iteration_s"]) for r in (0, 1)]
    assert float(g["time_per_iteration_s"]) >= max(rank_times) * (1 - ROUNDING)
    assert close(g[drv.work], 4 * drv.per_sample / float(g["time_per_iteration_s"]))
    for r, seconds in enumerate(rank_times):  # a rank's share of the batch over its own time
        assert close(lines[f"rank {r}"][drv.work], 2 * drv.per_sample / seconds)
    assert "rank 2" not in lines
    for rank in (0, 1):
        assert sorted(p.name for p in tmp_path.glob(f"*_rank{rank}.*"))


def test_two_ranks_close_a_measurement_window_after_the_same_iteration():
    """Each rank times its own iterations, so the window's seconds may be
    reached on one rank first: the ranks agree on it and stop together (a
    rank that went on alone would hang the job), past the iteration count."""
    code, lines, _, err = run(GPT, "--train-iters", "3", "--warmup-iters", "1",
                              "--min-timed-seconds", "0.5", "--energy-methods", "none", ranks=2)
    assert code == 0, err
    assert lines["stop"].startswith("measurement window reached")
    g = lines["global"]
    assert int(g["iterations"]) == int(g["iterations_total"]) - 1 > 2
    assert float(g["time_per_iteration_s"]) * int(g["iterations"]) >= 0.5 * (1 - ROUNDING)


@DRIVERS
def test_a_run_that_times_no_iteration_prints_what_it_has_and_exits_1(drv):
    # A budget of 6 ms is spent while the model is built: the run stops
    # before its first iteration.
    code, lines, _, err = run(drv, "--train-iters", "100", "--warmup-iters", "1",
                              "--exit-duration-in-mins", "0.0001", "--energy-methods", "none")
    assert code == 1, err
    assert lines["stop"] == "wall-clock budget 0.006 s reached"
    assert (lines["global"]["iterations"], lines["global"]["iterations_total"]) == ("0", "0")
    assert drv.work not in lines["global"]
    assert lines["ERROR"].startswith("no throughput figure: the run stopped (wall-clock budget")


@DRIVERS
def test_a_batch_the_ranks_cannot_split_fails_once_on_all_ranks_with_status_2(drv):
    code, lines, out, err = run(drv, "--global-batch-size", "8", "--train-iters", "3",
                                "--warmup-iters", "1",
                                "--energy-methods", "none", ranks=3)
    assert code != 0
    errors = [line for line in err.splitlines() if line.startswith("CARAML ERROR: ")]
    assert len(errors) == 1 and "8" in errors[0] and "3" in errors[0], err
    assert "exitcode  : 2" in err  # torchrun's report of the failed rank
    assert "global" not in lines and drv.progress not in out


@DRIVERS
@pytest.mark.parametrize("flags, message", [
    (["--energy-methods", "sensors", "--energy-dir", "e"], "--energy-methods: unknown method 'sensors'"),
    (["--energy-methods", "none", "auto"], "'none' cannot be combined with other methods"),
    (["--train-iters", "2", "--warmup-iters", "2"], "--train-iters 2 leaves no timed iteration"),
    (["--train-iters", "0"], "argument --train-iters: must be a positive integer (got 0)"),
    (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
])
def test_bad_input_is_one_line_and_status_2_before_any_training(drv, flags, message):
    code, lines, out, err = run(drv, "--train-iters", "3", "--warmup-iters", "1",
                                "--energy-methods", "none", *flags)
    assert code == 2
    assert err.splitlines()[-1] == "CARAML ERROR: " + lines["ERROR"]
    assert message in lines["ERROR"]
    assert "provenance" not in lines and drv.progress not in out
