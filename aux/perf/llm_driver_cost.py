"""What the LLM driver adds to its training step, measured inside one run,
so that a shared host's drift (which moves whole runs by 10 to 30 %) falls
on both sides of every difference alike. The driver core runs as the
benchmark runs it (caraml/node/driver.py: its loop, timing, stop
condition, jpwr measuring), over the torch backend and the data step's
corpus through the benchmark's DataLoader; per timed iteration it splits:

- the iteration, as the driver times it (what the row's figures rest on);
- the step: the backend's forward, backward and update, batches fetched;
- the data wait: the time spent taking the iteration's micro-batches;

so the loop's own cost is the iteration less the step, and the data
path's is the data wait. Any argument of the driver can be given after
`--`; the defaults are the CPU system's cpu-small run:

    .venv/bin/python aux/perf/llm_driver_cost.py [--iterations 40] [-- driver arguments]

A benchmark, not a test: it prints its figures and judges nothing."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_peers import CPU_DEFAULTS, DATA_ENV, prepared_data  # (puts the root on the path)

from caraml.node import driver
from caraml.node.loader_workers import loader_workers
from llm_training import arguments, pretrain_gpt
from llm_training.metrics import Workload

# the CPU system's run, as the peer scripts take it
CPU_RUN = ["--backend", "torch", "--model-size", CPU_DEFAULTS["model_size"],
           "--precision", CPU_DEFAULTS["precision"],
           "--global-batch-size", str(CPU_DEFAULTS["global_batch_size"]),
           "--micro-batch-size", str(CPU_DEFAULTS["micro_batch_size"]), "--device", "cpu",
           "--log-interval", "5", "--energy-methods", "auto"]


class Waited:
    """The batches, with the time spent taking each"""

    def __init__(self, batches: Iterator[dict]):
        self.batches, self.seconds = batches, 0.0

    def __iter__(self) -> Iterator[dict]:
        return self

    def __next__(self) -> dict:
        t0 = time.perf_counter()
        batch = next(self.batches)
        self.seconds += time.perf_counter() - t0
        return batch


def measured(args, dist, stop, meter) -> int:
    """The driver's train callable (pretrain_gpt.train_and_report's first
    half), with the step and the data wait timed per iteration"""
    setup = pretrain_gpt.set_up(args, dist)
    backend = pretrain_gpt.build_backend(setup.gpt, setup.args, setup.layout, dist)
    batches = Waited(pretrain_gpt.training_batches(setup, backend, dist))
    steps, waits = [], []

    def step():
        batches.seconds = 0.0
        t0 = time.perf_counter()
        stepped = backend.train_step(batches)
        dist.sync()
        steps.append(time.perf_counter() - t0)
        waits.append(batches.seconds)
        return stepped

    workload = Workload.of(setup.gpt, setup.layout.global_batch_size, setup.args.recompute,
                           setup.layout.devices)
    result = driver.train_loop(step, args, dist, stop, meter, pretrain_gpt.progress(args, workload))
    timed = slice(args.warmup_iters, args.warmup_iters + len(result.durations))
    iteration, stepped, waited = result.durations, steps[timed], waits[timed]
    loop = [i - s for i, s in zip(iteration, stepped)]
    median = statistics.median(iteration)
    if dist.is_main:
        print(f"# {len(iteration)} timed iterations, {args.model_size} {args.precision} on "
              f"{dist.device.type}, loader workers {loader_workers(args.num_workers, dist.device.type)}")
        print("| per timed iteration (median) | seconds | share of the iteration |")
        print("| --- | --- | --- |")
        for name, values in (("iteration, as the driver times it", iteration),
                             ("the step (batches fetched)", stepped),
                             ("the driver's loop (iteration less step)", loop),
                             ("the data wait (inside the step)", waited)):
            m = statistics.median(values)
            print(f"| {name} | {m:.6f} | {m / median:.2%} |")
    return driver.EXIT_OK


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=40, help="timed iterations")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("driver_args", nargs="*", help="after --: the driver's own arguments")
    a = p.parse_args()
    os.environ.update({k: v for k, v in DATA_ENV.items() if k not in os.environ})
    with tempfile.TemporaryDirectory() as work:
        data_args = prepared_data(Path(work), CPU_DEFAULTS["model_size"], dict(os.environ))
        argv = [f"@{data_args}", *CPU_RUN, "--train-iters", str(a.warmup + a.iterations),
                "--warmup-iters", str(a.warmup), "--energy-dir", str(Path(work) / "energy"),
                *a.driver_args]
        return driver.main(argv, arguments.parse, measured)


if __name__ == "__main__":
    sys.exit(main())
