"""What jpwr costs: the sampler thread's CPU time at the default interval,
the spacing of samples at 10 ms, and the throughput of a training loop with
jpwr on and off. Run from the repository root:

    nice -n -10 .venv/bin/python aux/perf/jpwr_overhead.py [--methods auto] [--seconds 10] [--reps 240]

(nice -n -10, as root, keeps other users' jobs on a shared machine from
dominating the on/off comparison; jpwr's sampler still runs 10 nice levels
below the training loop, as it always does.) The figures and the command
that produced them are recorded in docs/jpwr.md. This is a benchmark, not a
test: it prints numbers and judges nothing."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

import numpy as np

from jpwr.ctxmgr import get_power
from jpwr.methods import from_names


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def sampler_cost(methods, interval_ms: float, seconds: float, out_dir: str) -> dict:
    """The sampler's own CPU time over a run in which the main thread sleeps,
    with the files written as in a benchmark (flush every 2 s)."""
    with get_power(methods, interval_ms, out_dir=out_dir, suffix=f"_cost{interval_ms:g}") as scope:
        t0 = time.monotonic()
        time.sleep(seconds)
    wall = time.monotonic() - t0
    return {"interval_ms": interval_ms, "wall_s": wall, "cpu_s": scope.sampler_cpu_s,
            "percent_of_one_core": 100 * scope.sampler_cpu_s / wall,
            "samples": scope.samples()["time"].nunique()}


def spacing(methods, interval_ms: float, seconds: float, busy) -> dict:
    """Sample spacing while the main thread runs `busy` (or sleeps)."""
    with get_power(methods, interval_ms) as scope:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            busy() if busy else time.sleep(0.05)
    times = np.unique(scope.samples()["time"].to_numpy())
    gaps_ms = np.diff(times) * 1000
    return {"samples": len(times), "median_ms": float(np.median(gaps_ms)),
            "mean_ms": float(np.mean(gaps_ms)), "p95_ms": float(np.percentile(gaps_ms, 95)),
            "max_ms": float(np.max(gaps_ms)), "span_s": float(times[-1] - times[0]),
            "deadlines": int((times[-1] - times[0]) * 1000 / interval_ms) + 1}


def make_training_step(threads: int):
    """A small MLP trained with SGD on random data: the kind of loop jpwr
    wraps, sized to take a few milliseconds per step on a CPU."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(128, 256)
    y = torch.randint(0, 10, (128,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        optimiser.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimiser.step()

    return step, torch.get_num_threads(), torch.__version__


def throughput(step, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - t0)


def on_off(methods, step, reps: int, rep_seconds: float, out_dir: str) -> dict:
    """Interleaved repetitions (off, on, on, off, ...) so that drift in the
    machine's speed hits both sides alike; each repetition runs a fixed
    number of steps, sized from a warm-up to take about rep_seconds."""
    steps = max(10, round(throughput(step, 20) * rep_seconds))
    off, on = [], []
    for rep in range(reps):
        for jpwr_on in ((False, True) if rep % 2 == 0 else (True, False)):
            if jpwr_on:
                with get_power(methods, 100, out_dir=out_dir, suffix=f"_onoff{rep}"):
                    on.append(throughput(step, steps))
            else:
                off.append(throughput(step, steps))
    ratios = np.array(on) / np.array(off)
    # A 95 % interval for the median paired ratio, by resampling the pairs:
    # on a shared machine the spread says more than any single figure.
    resampled = np.random.default_rng(0).choice(ratios, size=(2000, len(ratios)))
    low, high = np.percentile(np.median(resampled, axis=1), [2.5, 97.5])
    return {"steps_per_rep": steps, "reps": reps,
            "off_median": statistics.median(off), "on_median": statistics.median(on),
            "difference_pct": 100 * (statistics.median(on) / statistics.median(off) - 1),
            "paired_ratio_median_pct": 100 * (float(np.median(ratios)) - 1),
            "paired_ratio_ci95_pct": (100 * (low - 1), 100 * (high - 1))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=["auto"])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each timed run")
    parser.add_argument("--reps", type=int, default=240, help="on/off pairs")
    parser.add_argument("--rep-seconds", type=float, default=0.5,
                        help="length of one training repetition")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: a shared machine's other load cannot stall a "
                             "parallel region waiting for its slowest thread)")
    args = parser.parse_args()

    methods = from_names(args.methods)
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.2f} at start")
    print(f"methods: {', '.join(m.name for m in methods)} "
          f"({', '.join(c.source for m in methods for c in m.channels)})")
    with tempfile.TemporaryDirectory() as out_dir:
        for interval in (100, 10):
            cost = sampler_cost(methods, interval, args.seconds, out_dir)
            print(f"sampler CPU at {interval} ms: {cost['cpu_s'] * 1000:.1f} ms CPU in "
                  f"{cost['wall_s']:.1f} s = {cost['percent_of_one_core']:.3f} % of one core "
                  f"({cost['samples']} samples)")
        step, threads, version = make_training_step(args.threads)
        for label, busy in (("main thread sleeping", None), ("main thread training", step)):
            s = spacing(methods, 10, args.seconds, busy)
            print(f"10 ms spacing, {label}: median {s['median_ms']:.3f} ms, mean {s['mean_ms']:.3f} ms, "
                  f"p95 {s['p95_ms']:.3f} ms, max {s['max_ms']:.1f} ms, "
                  f"{s['samples']} samples for {s['deadlines']} deadlines in {s['span_s']:.2f} s")
        result = on_off(methods, step, args.reps, args.rep_seconds, out_dir)
        print(f"training throughput (torch {version}, {threads} threads, MLP 256-512-512-10, "
              f"batch 128, {result['steps_per_rep']} steps x {result['reps']} reps each side, "
              f"interleaved): off {result['off_median']:.1f} steps/s, "
              f"on {result['on_median']:.1f} steps/s, difference {result['difference_pct']:+.2f} % "
              f"(median of paired ratios {result['paired_ratio_median_pct']:+.2f} %, 95 % interval "
              f"{result['paired_ratio_ci95_pct'][0]:+.2f} % .. {result['paired_ratio_ci95_pct'][1]:+.2f} %)")
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
