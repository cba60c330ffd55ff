"""The operator benchmark against plain loops, in two ways:

- as it runs: the FNO driver started as JUBE starts it (synthetic data,
  its loop, timing and stop condition, jpwr measuring) by turns with a
  plain loop in a process of its own over the same network (the suite's
  FNO), optimizer (its Adam) and batch, on the first problem
  (aux/perf/as_run.py);
- the step alone: the benchmark's own step (its FNO, data source and Adam
  step, as the driver wires them) side by side with a plain neuraloperator
  training loop (the FNO built straight from `neuralop.models.FNO`, Adam,
  MSE, autocast where the precision asks for it, the batch already on the
  device), in one process, interleaved round by round for every problem.

Each round is timed by the wall clock and by the process's CPU time: on a
host that other jobs load, the wall-clock ratio wanders with their load,
while the CPU time a step costs this process does not (it counts every
thread of the process, so it compares the loops' work, not their
parallelism). With more threads than free cores, OpenMP's waiting threads
spin and inflate both clocks; on a shared host, `--threads 1` gives
figures that hold still.

    .venv/bin/python aux/perf/fno_peers.py [--problems rbc2d-small pic2d-small ...]
        [--precision fp32] [--batch-size 4] [--rounds 5] [--iterations 5]
        [--as-run-rounds 16] [--as-run-iterations 800] [--as-run-slice 0.5] [--threads N] [--out docs/perf]

Defaults that fit the host: the CPU-sized problems on a CPU, the full-sized
ones on a GPU. Writes one JSON file per run into --out (machine, device,
versions, every round's figures, the ratios) and prints markdown tables
for docs/results.md. A benchmark, not a test: it judges nothing."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import as_run  # noqa: E402
import peer_record  # noqa: E402
import torch  # noqa: E402
from neuralop.models import FNO  # noqa: E402

from caraml.node import dist as caraml_dist  # noqa: E402
from caraml.node import precision as caraml_precision  # noqa: E402
from operator_benchmark import config, data, fno_training, model, problems  # noqa: E402

LR = 1e-3  # the driver's defaults
WEIGHT_DECAY = 1e-4
CPU_PROBLEMS = ["pic1d-small", "pic2d-small", "rbc2d-small", "rbc3d-small",
                "navier_stokes2d-small"]


def suite_loop(problem: problems.Problem, precision: str, batch: int, device: torch.device):
    """The benchmark's own pieces, as the driver wires them."""
    torch.manual_seed(0)
    net = model.build(problem, device)
    step = fno_training.adam_step(net, fno_training.adam(net, LR, WEIGHT_DECAY), precision,
                                  device)
    source = data.synthetic(problem, batch, device, seed=0)
    return lambda: step(*next(source))


def plain_loop(problem: problems.Problem, precision: str, batch: int, device: torch.device):
    """What a user would write from neuraloperator's and PyTorch's examples."""
    torch.manual_seed(0)
    net = FNO(n_modes=problem.modes, in_channels=problem.in_fields,
              out_channels=problem.out_fields, hidden_channels=problem.width,
              n_layers=problem.layers).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    return _step(net, opt, problem, precision, batch, device)


def same_network_loop(problem: problems.Problem, precision: str, batch: int,
                      device: torch.device):
    """A plain loop over the suite's FNO and its Adam, written out: the
    as-run comparison's peer, which differs from the driver only in what
    runs around the step"""
    torch.manual_seed(0)
    net = model.build(problem, device)
    opt = fno_training.adam(net, LR, WEIGHT_DECAY)
    return _step(net, opt, problem, precision, batch, device)


def _step(net, opt, problem: problems.Problem, precision: str, batch: int, device: torch.device):
    """A plain training step on one random batch, as both plain loops write it."""
    x = torch.randn(batch, problem.in_fields, *problem.grid, device=device)
    y = torch.randn(batch, problem.out_fields, *problem.grid, device=device)
    dtype = caraml_precision.DTYPES[precision]

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=precision == "bf16"):
            loss = torch.nn.functional.mse_loss(net(x).float(), y)
        loss.backward()
        opt.step()

    return step


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", nargs="+", default=None,
                   help=f"default on a CPU: {' '.join(CPU_PROBLEMS)}; on a GPU: the full-sized ones")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--iterations", type=int, default=5, help="steps per loop and round (step alone)")
    # an iteration of the CPU-sized problems takes 13 to 30 ms: a turn of
    # 0.5 s spans a few dozen, and 800 of them a few dozen turns; a round
    # takes under a minute, and at 8 rounds the median's interval spanned
    # 0.961-0.997, at 16 0.983-0.998 (docs/results.md)
    as_run.add_arguments(p, warmup=2, iterations=800, slice_s=0.5, rounds=16)
    p.add_argument("--threads", type=int, default=None,
                   help="torch's intra-op threads (default: torch's own choice)")
    p.add_argument("--out", type=Path, default=peer_record.OUT)
    a = p.parse_args()
    if a.precision == "fp16":
        raise SystemExit(config.FP16_REFUSED)
    a.problems = a.problems or (
        [n for n in problems.names() if not n.endswith(problems.SMALL_SUFFIX)]
        if torch.cuda.is_available() else CPU_PROBLEMS)
    return a


def plain_process(a: argparse.Namespace) -> int:
    """--plain: the same-network loop alone, timed for aux/perf/as_run.py"""
    dist = caraml_dist.init("auto")
    caraml_precision.set_fp32_math(a.precision, dist.device)
    step = same_network_loop(problems.get(a.problems[0]), a.precision, a.batch_size, dist.device)
    as_run.time_plain(step, a.warmup, a.as_run_iterations, dist.sync)
    dist.close()
    return 0


def driver_args(a: argparse.Namespace, device: str, energy_dir: str,
                energy_methods: str = "auto") -> list[str]:
    """The FNO driver's command line, as the as-run comparison starts it"""
    return ["-m", "operator_benchmark.fno_training", "--problem", a.problems[0],
            "--global-batch-size", str(a.batch_size), "--precision", a.precision,
            "--compile", "none", "--train-iters", str(a.warmup + a.as_run_iterations),
            "--warmup-iters", str(a.warmup), "--energy-dir", energy_dir,
            "--energy-methods", energy_methods, "--device", device]


def plain_args(a: argparse.Namespace) -> list[str]:
    """The plain loop's arguments (after --plain) for the same run"""
    return ["--problems", a.problems[0], "--precision", a.precision, "--batch-size",
            str(a.batch_size), "--warmup", str(a.warmup),
            "--as-run-iterations", str(a.as_run_iterations)]


def as_run_comparison(a: argparse.Namespace, device: str) -> dict:
    env = dict(os.environ)
    if a.threads is not None:  # both sides alike: torch reads it as it starts
        env["OMP_NUM_THREADS"] = str(a.threads)
    with tempfile.TemporaryDirectory() as energy:
        figures = as_run.compare(a, device, driver_args(a, device, energy), Path(__file__),
                                 plain_args(a), env)
    return {"problem": a.problems[0]} | figures


def main() -> int:
    a = parse()
    warnings.filterwarnings("ignore")
    if a.threads is not None:
        torch.set_num_threads(a.threads)
    if a.plain:
        return plain_process(a)
    as_run_figures = (as_run_comparison(a, "cuda" if torch.cuda.is_available() else "cpu")
                      if a.as_run_rounds else None)
    dist = caraml_dist.init("auto")
    device = dist.device
    names = a.problems
    caraml_precision.check(a.precision, device)
    caraml_precision.set_fp32_math(a.precision, device)
    results = {}
    for name in names:
        problem = problems.get(name)
        loops = {"suite": suite_loop(problem, a.precision, a.batch_size, device),
                 "plain": plain_loop(problem, a.precision, a.batch_size, device)}
        rates = {loop: [] for loop in loops}
        cpu_s = {loop: [] for loop in loops}  # CPU seconds per step
        for r in range(a.warmup + a.rounds):
            for loop in (list(loops) if r % 2 == 0 else list(reversed(loops))):
                dist.sync()
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(a.iterations):
                    loops[loop]()
                dist.sync()
                if r >= a.warmup:
                    rates[loop].append(a.batch_size * a.iterations / (time.perf_counter() - t0))
                    cpu_s[loop].append((time.process_time() - c0) / a.iterations)
        median = {loop: statistics.median(v) for loop, v in rates.items()}
        median_cpu = {loop: statistics.median(v) for loop, v in cpu_s.items()}
        results[name] = {"samples_per_s": rates, "cpu_s_per_step": cpu_s, "median": median,
                         "median_cpu_s_per_step": median_cpu,
                         "suite_vs_plain": median["suite"] / median["plain"],
                         "suite_vs_plain_cpu_time": median_cpu["plain"] / median_cpu["suite"]}
        del loops
        if device.type == "cuda":
            torch.cuda.empty_cache()
    record = peer_record.header("fno_peers", dist) | {
        "precision": a.precision, "batch_size": a.batch_size, "rounds": a.rounds,
        "threads": torch.get_num_threads(), "as_run": as_run_figures,
        "iterations_per_round": a.iterations, "problems": results,
    }
    path = peer_record.write(record, a.out, a.precision)
    print(f"# {record['device']}, FNO {a.precision}, batch {a.batch_size}, "
          f"{torch.get_num_threads()} thread(s)")
    status = as_run.report(f"# as run: the driver against a plain loop over the same network, "
                           f"{as_run_figures['problem']}", "FNO driver", as_run_figures,
                           peer_record.print_table) if as_run_figures else 0
    print(f"# the step alone against stock neuraloperator, medians of {a.rounds} interleaved rounds")
    peer_record.print_table(
        ["problem", "suite samples/s", "plain neuraloperator loop samples/s", "suite / plain (wall)",
         "suite CPU ms per step", "plain CPU ms per step", "suite / plain (CPU time)"],
        [[name, f"{r['median']['suite']:.1f}", f"{r['median']['plain']:.1f}",
          f"{r['suite_vs_plain']:.2f}x", f"{r['median_cpu_s_per_step']['suite'] * 1e3:.2f}",
          f"{r['median_cpu_s_per_step']['plain'] * 1e3:.2f}", f"{r['suite_vs_plain_cpu_time']:.2f}x"]
         for name, r in results.items()])
    print(f"# written: {path}")
    dist.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
