"""Operator-learning training benchmark: trains neuraloperator's Fourier
Neural Operator on a problem's fields (synthetic, or the Navier-Stokes data
the suite generates), on one device or with DDP under torchrun, and prints
samples/s per rank and in total, the time per epoch and the counted FLOP/s
(CARAML lines) while jpwr measures each rank's energy. Usage:
docs/operator_benchmark.md."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):
    # Started as a script: the suite's packages live one folder up.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from caraml import report
from caraml.node import data_parallel, driver, memory, precision, throughput
from caraml.node.dist import Dist
from caraml.node.driver import EnergyMeter, LoopResult
from caraml.node.stopping import StopCondition
from caraml.node.timing import TimingStats
from operator_benchmark import config, data, flops, model, navier_stokes, problems
from operator_benchmark.config import Options
from operator_benchmark.problems import Problem

MODEL = "FNO"


def generated_setup(args: Options, problem: Problem) -> navier_stokes.Setup:
    return navier_stokes.Setup(grid=problem.grid[0], samples=args.generated_samples,
                               seed=args.seed)


def generated_data(args: Options, problem: Problem, dist: Dist) -> tuple[torch.Tensor, torch.Tensor]:
    """The Navier-Stokes samples, divided by the initial fields' rms
    vorticity so the loss starts near 1: the first rank of each node makes
    or checks the cache while the others wait, then the others read it."""
    setup = generated_setup(args, problem)
    made = driver.agreed(dist, lambda: navier_stokes.load_or_make(setup, dist.device)
                         if dist.local_rank == 0 else None)
    # a collective: every rank takes part, those that made the data too
    inputs, outputs = driver.agreed(
        dist, lambda: made if made is not None else navier_stokes.load(setup))
    return inputs / setup.amplitude, outputs / setup.amplitude


def batches(args: Options, problem: Problem, dist: Dist, batch_size: int) -> Iterator[data.Batch]:
    if args.data_kind == problems.GENERATED:
        inputs, outputs = generated_data(args, problem, dist)
        return driver.agreed(dist, lambda: data.shards(inputs, outputs, batch_size, dist,
                                                       args.seed))
    return data.synthetic(problem, batch_size, dist.device, args.seed + dist.rank)


def describe(args: Options, problem: Problem, dist: Dist, batch_size: int,
             parameters: int) -> str:
    return (f"{MODEL} on {args.problem} ({problem.in_fields} -> {problem.out_fields} fields on "
            f"{problem.grid_text}; modes {problem.value('modes')}, width {problem.width}, "
            f"{problem.layers} layers; {parameters / 1e6:.2f} M real parameters), "
            f"{args.precision}, compile {args.compile}; data {args.data_kind}; global batch "
            f"{args.global_batch_size} = {dist.world_size} {dist.device.type} device(s) x "
            f"{batch_size}; {args.train_iters} iterations, {args.warmup_iters} of them warm-up")


def adam(net: torch.nn.Module, lr: float, weight_decay: float) -> torch.optim.Adam:
    """Adam with its multi-tensor (foreach) update on every device: torch
    picks it by itself only on GPUs, and on a CPU it saves about 5 % of a
    small FNO's step over the per-parameter loop (aux/perf/fno_peers.py)."""
    return torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay, foreach=True)


def adam_step(net: torch.nn.Module, optimizer: torch.optim.Optimizer, precision_name: str,
              device: torch.device):
    """Forward, backward and update on one batch; returns the loss (not
    synchronised, so reading it is left to the caller). No gradient scaler:
    the precisions the benchmark takes (fp32, tf32, bf16) need none
    (config.FP16_REFUSED says why fp16 is not one of them)."""

    def step(inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast(precision_name, device):
            loss = model.loss(net(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


def train_model(args: Options, problem: Problem, dist: Dist, batch_size: int,
                stop: StopCondition, energy: EnergyMeter) -> tuple[LoopResult, int]:
    """Builds data and model, counts the FLOPs of a step, and trains; the
    DDP model lives only in this frame (see image_classification's driver:
    it must be gone before the process group is)."""
    source = batches(args, problem, dist, batch_size)
    precision.set_fp32_math(args.precision, dist.device)
    torch.manual_seed(args.seed)
    net = model.build(problem, dist.device)
    flops_per_sample = flops.counted_per_sample(net, problem, dist.device)
    optimizer = adam(net, args.lr, args.weight_decay)
    step = adam_step(model.parallelize(net, dist, args.compile), optimizer, args.precision,
                     dist.device)
    if dist.is_main:
        report.write_line(describe(args, problem, dist, batch_size, model.parameter_count(net)))
    result = driver.train_loop(lambda: step(*next(source)), args, dist, stop, energy,
                               data_parallel.progress(args, "samples", ".4g"))
    return result, flops_per_sample


def overall(args: Options, job: TimingStats, devices: int, flops_per_sample: int) -> dict:
    """The timing figures of the `CARAML global:` line, from the job's
    iterations (each as long as its slowest rank's), with the epoch's time
    and the counted TFLOP/s."""
    figures = throughput.overall("samples", args.global_batch_size, job, devices)
    mean = figures["samples_per_s_mean"]
    return {**figures,
            "epoch_s": args.epoch_samples / mean,
            "tflops_counted_per_device": flops_per_sample * mean / devices / 1e12}


def compiling(args: Options) -> str | None:
    """The option that makes this run compile kernels, if any."""
    return None if args.compile == "none" else f"--compile {args.compile}"


def train_and_report(args: Options, dist: Dist, stop: StopCondition,
                     energy: EnergyMeter) -> int:
    problem = problems.get(args.problem)
    batch_size = data_parallel.batch_per_device(args, dist, compiling(args))
    with memory.out_of_memory_is_input(
            batch_size, dist.device, f"{args.problem} on {problem.grid_text} does not fit; lower "
            f"the global batch size, use more devices or a smaller problem"):
        result, flops_per_sample = train_model(args, problem, dist, batch_size, stop, energy)

    return data_parallel.report_result(
        args, dist, result, batch_size, "samples",
        head={"problem": args.problem, "model": MODEL, "data": args.data_kind,
              "precision": args.precision, "compile": args.compile},
        figures=lambda job: overall(args, job, dist.world_size, flops_per_sample),
        tail={"samples_per_epoch": args.epoch_samples, "flops_counted_per_sample": flops_per_sample,
              "flops_note": flops.NOTE})


def main(argv: list[str] | None = None) -> int:
    return data_parallel.main(argv, config.parse, lambda args: args.list_problems, problems.names,
                              config.check_input, train_and_report)


if __name__ == "__main__":
    sys.exit(main())
