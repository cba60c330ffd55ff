"""Training throughput of the operator benchmark's own step (its FNO, data
source and Adam step, as the driver wires them) side by side with a plain
neuraloperator training loop of the same model, batch and precision: the
FNO built straight from `neuralop.models.FNO`, Adam, MSE, autocast where
the precision asks for it, the batch already on the device. One process,
one device, interleaved round by round for every problem, so a clock
change or another job hits both loops alike.

    .venv/bin/python aux/perf/fno_peers.py [--problems rbc2d-small pic2d-small ...]
        [--precision fp32] [--batch-size 4] [--rounds 10] [--iterations 5] [--out docs/perf]

Writes one JSON file per run into --out (machine, device, versions, every
round's samples/s, and the suite's ratio to the plain loop per problem) and
prints a markdown table for docs/operator_benchmark.md. A benchmark, not a
test: it judges nothing."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import peer_record  # noqa: E402
import torch  # noqa: E402
from neuralop.models import FNO  # noqa: E402

from caraml import dist as caraml_dist  # noqa: E402
from caraml import precision as caraml_precision  # noqa: E402
from operator_benchmark import data, fno_training, model, problems  # noqa: E402

LR = 1e-3  # the driver's defaults
WEIGHT_DECAY = 1e-4
CPU_PROBLEMS = ["pic1d-small", "pic2d-small", "rbc2d-small", "rbc3d-small",
                "navier_stokes2d-small"]


def suite_loop(problem: problems.Problem, precision: str, batch: int, device: torch.device):
    """The benchmark's own pieces, as the driver wires them."""
    torch.manual_seed(0)
    net = model.build(problem, device)
    opt = torch.optim.Adam(net.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    step = fno_training.adam_step(net, opt, precision, device)
    source = data.synthetic(problem, batch, device, seed=0)
    return lambda: step(*next(source))


def plain_loop(problem: problems.Problem, precision: str, batch: int, device: torch.device):
    """What a user would write from neuraloperator's and PyTorch's examples."""
    torch.manual_seed(0)
    net = FNO(n_modes=problem.modes, in_channels=problem.in_fields,
              out_channels=problem.out_fields, hidden_channels=problem.width,
              n_layers=problem.layers).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    x = torch.randn(batch, problem.in_fields, *problem.grid, device=device)
    y = torch.randn(batch, problem.out_fields, *problem.grid, device=device)
    dtype = caraml_precision.DTYPES[precision]

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype, enabled=precision in ("fp16", "bf16")):
            loss = torch.nn.functional.mse_loss(net(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", nargs="+", default=None,
                   help=f"default on a CPU: {' '.join(CPU_PROBLEMS)}; on a GPU: the full-sized ones")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--iterations", type=int, default=5, help="steps per loop and round")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds first")
    p.add_argument("--out", type=Path, default=peer_record.OUT)
    a = p.parse_args()
    warnings.filterwarnings("ignore")
    dist = caraml_dist.init("auto")
    device = dist.device
    names = a.problems or (CPU_PROBLEMS if device.type == "cpu" else
                           [n for n in problems.names() if not n.endswith(problems.SMALL_SUFFIX)])
    caraml_precision.check(a.precision, device)
    caraml_precision.set_fp32_math(a.precision, device)
    results = {}
    for name in names:
        problem = problems.get(name)
        loops = {"suite": suite_loop(problem, a.precision, a.batch_size, device),
                 "plain": plain_loop(problem, a.precision, a.batch_size, device)}
        rates = {loop: [] for loop in loops}
        for r in range(a.warmup + a.rounds):
            for loop in (list(loops) if r % 2 == 0 else list(reversed(loops))):
                dist.sync()
                t0 = time.perf_counter()
                for _ in range(a.iterations):
                    loops[loop]()
                dist.sync()
                if r >= a.warmup:
                    rates[loop].append(a.batch_size * a.iterations / (time.perf_counter() - t0))
        median = {loop: statistics.median(v) for loop, v in rates.items()}
        results[name] = {"samples_per_s": rates, "median": median,
                         "suite_vs_plain": median["suite"] / median["plain"]}
        del loops
        if device.type == "cuda":
            torch.cuda.empty_cache()
    record = peer_record.header("fno_peers", dist) | {
        "precision": a.precision, "batch_size": a.batch_size, "rounds": a.rounds,
        "iterations_per_round": a.iterations, "problems": results,
    }
    path = peer_record.write(record, a.out, a.precision)
    print(f"# {record['device']}, FNO {a.precision}, batch {a.batch_size}, "
          f"median samples/s of {a.rounds} interleaved rounds")
    peer_record.print_table(
        ["problem", "suite", "plain neuraloperator loop", "suite / plain"],
        [[name, f"{r['median']['suite']:.1f}", f"{r['median']['plain']:.1f}",
          f"{r['suite_vs_plain']:.2f}x"] for name, r in results.items()])
    print(f"# written: {path}")
    dist.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
