"""GPT pretraining benchmark driver: trains a GPT decoder with the megatron
(megatron-core) or torch (native PyTorch) backend on one device or many
(torchrun, Slurm), and prints Megatron-style progress lines, per-rank lines
and one CARAML summary line (tokens/s, TFLOP/s per device, MFU) while jpwr
measures each rank's energy. Usage: docs/llm_training.md.

    python -m llm_training.pretrain_gpt --model-size cpu-small --synthetic \\
        --train-iters 20 --warmup-iters 4 --energy-methods none --peak-tflops measure
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import sys
from dataclasses import dataclass

import torch

from caraml import device_peaks, report
from caraml.device_peaks import MEASURED, Peak
from caraml.node import driver, memory, precision
from caraml.node.dist import Dist
from caraml.node.driver import EnergyMeter, LoopResult
from caraml.node.loader_workers import loader_workers
from caraml.node.stopping import StopCondition
from caraml.node.timing import TimingStats, summarize
from caraml.report import BenchmarkInputError
from llm_training import arguments, matmul_rate, memory_plan, training
from llm_training.arguments import Args, Layout
from llm_training.batches import micro_batches
from llm_training.flops import iteration_record, parameter_count
from llm_training.matmul_rate import MatmulRate
from llm_training.metrics import Workload, peak_fields, throughput
from llm_training.model_sizes import GPTConfig


@dataclass
class Setup:
    """Everything checked and loaded before the model is built."""

    args: Args  # what was `auto` (recomputation, micro-batch) decided
    layout: Layout
    gpt: GPTConfig
    train_data: torch.utils.data.Dataset


def set_up(args: Args, dist: Dist) -> Setup:
    """Raises BenchmarkInputError for anything that must stop the run."""
    layout = arguments.resolve_layout(args, dist.world_size)
    precision.check(args.precision, dist.device)
    precision.set_fp32_math(args.precision, dist.device)
    if args.backend == "megatron":
        if dist.device.type != "cuda":
            raise BenchmarkInputError(
                f"the megatron backend needs a CUDA or ROCm GPU (megatron-core calls torch.cuda) "
                f"and this run is on {dist.device.type}; use --backend torch")
        from llm_training import gpt_megatron

        if layout.sequence_parallel and not (gpt_megatron.HAVE_TRANSFORMER_ENGINE
                                             or gpt_megatron.HAVE_APEX):
            raise BenchmarkInputError(
                "sequence parallelism needs Transformer Engine or Apex layer norms and neither "
                "is installed; install one or pass --no-sequence-parallel")

    from llm_training.data import Tokenizer, build_datasets

    vocab_size = (args.vocab_size
                  or Tokenizer.from_files(args.vocab_file, args.merge_file).vocab_size)
    gpt = arguments.gpt_config(args, vocab_size)
    args, layout = plan_memory(args, layout, gpt, dist)
    train_data, _ = build_datasets(
        data_prefix=args.data_path, synthetic=args.synthetic, vocab_size=vocab_size,
        seq_length=gpt.seq_length, split=args.split,
        num_train_samples=args.train_iters * layout.global_batch_size, num_valid_samples=0,
        seed=args.seed)
    return Setup(args, layout, gpt, train_data)


def plan_memory(args: Args, layout: Layout, gpt: GPTConfig, dist: Dist) -> tuple[Args, Layout]:
    """Decides what is `auto` from the device's memory (the same on every
    rank: the plan depends on the layout and the device model only)."""
    if args.recompute != "auto" and not args.auto_micro_batch:
        return args, layout
    plan = memory_plan.choose(gpt, layout, args, memory.capacity_bytes(dist.device),
                              auto_recompute=args.recompute == "auto",
                              auto_micro_batch=args.auto_micro_batch)
    if dist.is_main:
        report.write_line(f"memory plan: recompute {plan.recompute}, micro-batch "
                          f"{plan.micro_batch_size}: about {plan.estimate_gib:.1f} GiB of "
                          f"{plan.usable_gib:.1f} GiB usable per device")
    args = dataclasses.replace(args, recompute=plan.recompute,
                               micro_batch_size=plan.micro_batch_size, auto_micro_batch=False)
    # the layout resolved once (set_up); the plan changes its micro-batch only
    return args, dataclasses.replace(layout, micro_batch_size=plan.micro_batch_size)


def build_backend(gpt: GPTConfig, args: Args, layout: Layout, dist: Dist) -> training.Backend:
    if args.backend == "megatron":
        from llm_training.megatron_backend import MegatronBackend

        return MegatronBackend(gpt, args, layout, dist)
    from llm_training.torch_backend import TorchBackend

    return TorchBackend(gpt, args, layout, dist)


def training_batches(setup: Setup, backend: training.Backend, dist: Dist):
    """This rank's micro-batches, through the DataLoader with the workers
    its cores allow"""
    return micro_batches(setup.train_data, micro_batch_size=setup.layout.micro_batch_size,
                         data_parallel=setup.layout.data_parallel,
                         data_parallel_rank=backend.data_parallel_rank,
                         num_workers=loader_workers(setup.args.num_workers, dist.device.type),
                         device=dist.device)


def peak_of(args: Args, dist: Dist) -> Peak:
    if args.peak_tflops is None:
        return device_peaks.NONE
    if args.peak_tflops in device_peaks.PEAKS:  # the system names its device
        return device_peaks.PEAKS[args.peak_tflops]
    if args.peak_tflops == "auto" and dist.device.type == "cuda":
        known = device_peaks.lookup(torch.cuda.get_device_name(dist.device))
        if known is not None:
            return known
    if args.peak_tflops in ("auto", "measure"):
        # All ranks measure at once, sharing the host as they do in training;
        # each window's rate is the ranks' mean.
        seconds = matmul_rate.SECONDS if args.peak_seconds is None else args.peak_seconds
        mine = matmul_rate.measure(dist.device, precision.DTYPES[args.precision], seconds=seconds)
        ranks = dist.gather_floats(list(mine.windows))
        rate = MatmulRate(tuple(map(statistics.fmean, zip(*ranks))))
        return device_peaks.measured(rate.tflops, rate.windows)
    return device_peaks.given(args.peak_tflops)


def progress(args: Args, workload: Workload) -> driver.Progress:
    """Megatron-LM's progress line, with this benchmark's figures."""
    def line(done: int, seconds: float, loss: float) -> str:
        return (f" iteration {done:8d}/{args.planned:>8} |"
                f" elapsed time per iteration (ms): {seconds * 1e3:.1f} |"
                f" tokens/s: {workload.tokens_per_s(seconds):.1f} |"
                f" TFLOP/s per device: {workload.tflops_per_device(seconds):.4g} |"
                f" lm loss: {loss:.6E} |")
    return line


def global_line(setup: Setup, backend: training.Backend, workload: Workload, peak: Peak,
                result: LoopResult, job: TimingStats | None) -> dict:
    args, layout, gpt = setup.args, setup.layout, setup.gpt
    return dict(
        backend=backend.name,
        model_size=args.model_size,
        params=parameter_count(gpt),
        devices=layout.devices,
        tp=layout.tensor_parallel,
        pp=layout.pipeline_parallel,
        dp=layout.data_parallel,
        global_batch_size=layout.global_batch_size,
        micro_batch_size=layout.micro_batch_size,
        seq_length=gpt.seq_length,
        precision=args.precision,
        **(throughput(workload, job.mean_s, job.median_s, peak,
                      foreign_cpu_pct=result.foreign_cpu_pct) if job else {}),
        **peak_fields(peak),
        tokens_total=result.iterations * workload.tokens,
        tokens_timed=(job.iterations if job else 0) * workload.tokens,
        recompute=args.recompute,
        sequence_parallel=int(layout.sequence_parallel),
        distributed_optimizer=int(args.distributed_optimizer),
        attention=backend.attention,
        vocab_size=gpt.vocab_size,
    )


def train_and_report(args: Args, dist: Dist, stop: StopCondition, energy: EnergyMeter) -> int:
    """Everything between joining and leaving the process group. The model
    (DDP or megatron-core's) lives only in this frame: destroying the group
    while DDP's reducer still holds it can deadlock gloo (torch 2.13)."""
    setup = driver.agreed(dist, lambda: set_up(args, dist))
    args, layout, gpt = setup.args, setup.layout, setup.gpt
    with memory.out_of_memory_is_input(
            layout.micro_batch_size, dist.device, "lower --micro-batch-size (gradient "
            "accumulation keeps the global batch) or pass --recompute-activations full"):
        backend = build_backend(gpt, args, layout, dist)
        batches = training_batches(setup, backend, dist)
        workload = Workload.of(gpt, layout.global_batch_size, args.recompute, layout.devices)
        peak = peak_of(args, dist)
        result = driver.train_loop(lambda: backend.train_step(batches), args, dist, stop, energy,
                                   progress(args, workload))
        if peak.basis == MEASURED and result.iterations >= args.train_iters:
            # On a shared host another job can hold a core for whole windows and
            # halve the measured rate; windows after training as well make it rarer
            # that it holds all of them. A run stopped by a signal or its budget
            # reports at once instead.
            rate = MatmulRate(peak.windows + peak_of(args, dist).windows)
            peak = device_peaks.measured(rate.tflops, rate.windows)

    def rank_line(durations: list[float]) -> dict:
        # A rank's share of the global batch over its own time per iteration.
        mean = summarize(durations).mean_s
        return dict(tokens_per_s=workload.tokens_per_s(mean) / workload.devices,
                    time_per_iteration_s=mean)

    return driver.report_result(
        dist, result, rank_line=rank_line,
        global_line=lambda job: global_line(setup, backend, workload, peak, result, job),
        work={**iteration_record(gpt, layout.global_batch_size, args.recompute),
              # the peak MFU divides by, with the matmul windows a measured one is the best of
              "peak": {"tflops": peak.tflops if math.isfinite(peak.tflops) else None, "basis": peak.basis,
                       "key": peak.key, "windows": list(peak.windows)}})


def megatron_environment(args: Args) -> None:
    if args.backend == "megatron":
        # Megatron-core's overlap of tensor-parallel communication with
        # compute relies on one CUDA work queue; it must be set before CUDA starts.
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")


def main(argv: list[str] | None = None) -> int:
    return driver.main(argv, arguments.parse, train_and_report, before_init=megatron_environment)


if __name__ == "__main__":
    sys.exit(main())
