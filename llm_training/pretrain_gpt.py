"""GPT pretraining benchmark driver: trains a GPT decoder with the megatron
(megatron-core) or torch (native PyTorch) backend on one device or many
(torchrun, Slurm), and prints Megatron-style progress lines, per-rank lines
and one CARAML summary line (tokens/s, TFLOP/s per device, MFU) while jpwr
measures each rank's energy. Usage: docs/llm_training.md.

    python -m llm_training.pretrain_gpt --model-size cpu-small --synthetic \\
        --train-iters 20 --warmup-iters 4 --energy-methods none --peak-tflops measure
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import statistics
import sys
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

from caraml import device_peaks, memory, precision, provenance, report
from caraml import dist as caraml_dist
from caraml.dist import Dist
from caraml.energy import TimedWindow
from caraml.report import BenchmarkInputError
from caraml.stopping import StopCondition
from caraml.timing import slowest_per_iteration, summarize
from llm_training import arguments, memory_plan, training
from llm_training.arguments import Args, Layout
from llm_training.batches import micro_batches
from llm_training.flops import iteration_flops, parameter_count
from llm_training.matmul_rate import measure_tflops
from llm_training.metrics import MEASURED, Peak, Workload, throughput
from llm_training.model_sizes import GPTConfig


@dataclass
class Prepared:
    """Everything checked and loaded before the model is built."""

    args: Args  # what was `auto` (recomputation, micro-batch) decided
    layout: Layout
    gpt: GPTConfig
    train_data: torch.utils.data.Dataset
    energy: Callable[[], AbstractContextManager]


def prepare(args: Args, dist: Dist) -> Prepared:
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
    return Prepared(args, layout, gpt, train_data, energy_scope(args, dist.rank))


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
    return args, arguments.resolve_layout(args, dist.world_size)


def energy_scope(args: Args, rank: int) -> Callable[[], AbstractContextManager]:
    """A context that measures this rank's energy around the training loop.
    jpwr is imported now, so a missing one or a bad method name stops the
    run before training, not after."""
    if not args.energy_methods:
        return contextlib.nullcontext
    try:
        from caraml.energy import measured
        from jpwr.methods import check_names
    except ImportError as e:
        raise BenchmarkInputError(
            f"energy measurement needs jpwr and it does not import here ({e}); "
            "pass --energy-methods none to train without measuring energy") from None
    try:
        check_names(args.energy_methods)
    except ValueError as e:
        raise BenchmarkInputError(f"--energy-methods: {e}") from None
    return lambda: measured(args.energy_dir, rank, args.energy_methods, args.energy_interval_ms)


def first_failure_reported(dist: Dist, error: str | None) -> bool:
    """True on every rank if any rank failed; the lowest failing rank prints
    its message, so a failure shows once and is never lost."""
    flags = dist.gather_floats([0.0 if error is None else 1.0])
    failing = [rank for rank, (flag,) in enumerate(flags) if flag]
    if failing and dist.rank == failing[0]:
        report.error(error)
    return bool(failing)


def build_backend(gpt: GPTConfig, args: Args, layout: Layout, dist: Dist) -> training.Backend:
    if args.backend == "megatron":
        from llm_training.megatron_backend import MegatronBackend

        return MegatronBackend(gpt, args, layout, dist)
    from llm_training.torch_backend import TorchBackend

    return TorchBackend(gpt, args, layout, dist)


def peak_of(args: Args, dist: Dist) -> Peak:
    if args.peak_tflops is None:
        return Peak.none()
    if args.peak_tflops == "auto" and dist.device.type == "cuda":
        known = device_peaks.lookup(torch.cuda.get_device_name(dist.device))
        if known is not None:
            return Peak(known.tflops, "datasheet")
    if args.peak_tflops in ("auto", "measure"):
        # All ranks measure at once, sharing the host as they do in training.
        mine = measure_tflops(dist.device, precision.DTYPES[args.precision])
        return Peak(statistics.fmean(r[0] for r in dist.gather_floats([mine])), MEASURED)
    return Peak(args.peak_tflops, "datasheet")


def summarise(args: Args, dist: Dist, prepared: Prepared, backend: training.Backend,
              workload: Workload, peak: Peak, nodes: int, result: training.LoopResult) -> None:
    # All ranks stop at the same iteration, so all timed the same number.
    timed = bool(result.durations)
    mine = summarize(result.durations) if timed else None
    # A rank's share of the global batch over its own time per iteration.
    mean = mine.mean_s if timed else math.nan
    report.emit(f"rank {dist.rank}", tokens_per_s=workload.tokens_per_s(mean) / workload.devices,
                time_per_iteration_s=mean, iterations_total=result.iterations)
    job = summarize(slowest_per_iteration(dist.gather_floats(result.durations))) if timed else None
    peak_memory = memory.peak(dist)
    if not dist.is_main:
        return
    layout, gpt = prepared.layout, prepared.gpt
    report.emit(
        "global",
        backend=backend.name,
        model_size=args.model_size,
        params=parameter_count(gpt),
        nodes=nodes,
        devices=layout.devices,
        tp=layout.tensor_parallel,
        pp=layout.pipeline_parallel,
        dp=layout.data_parallel,
        global_batch_size=layout.global_batch_size,
        micro_batch_size=layout.micro_batch_size,
        seq_length=gpt.seq_length,
        precision=args.precision,
        iterations=len(result.durations),
        iterations_total=result.iterations,
        **throughput(workload, job.mean_s if job else math.nan, job.median_s if job else math.nan,
                     peak),
        peak_tflops=peak.tflops,
        peak_source=peak.source,
        tokens_total=result.iterations * workload.tokens,
        loss=result.loss,
        recompute=args.recompute,
        sequence_parallel=int(layout.sequence_parallel),
        distributed_optimizer=int(args.distributed_optimizer),
        attention=backend.attention,
        vocab_size=gpt.vocab_size,
        **peak_memory,
    )
    report.stop(result.stop_reason)


def train_and_report(args: Args, dist: Dist, stop: StopCondition) -> int:
    """Everything between joining and leaving the process group. The model
    (DDP or megatron-core's) lives only in this frame: destroying the group
    while DDP's reducer still holds it can deadlock gloo (torch 2.13)."""
    error, prepared = None, None
    try:
        prepared = prepare(args, dist)
    except BenchmarkInputError as e:
        error = str(e)
    if first_failure_reported(dist, error):
        return 1
    provenance.record(dist, args.energy_dir)
    args, layout, gpt = prepared.args, prepared.layout, prepared.gpt
    try:
        backend = build_backend(gpt, args, layout, dist)
        batches = micro_batches(prepared.train_data, micro_batch_size=layout.micro_batch_size,
                                data_parallel=layout.data_parallel,
                                data_parallel_rank=backend.data_parallel_rank,
                                num_workers=args.num_workers, device=dist.device)
        workload = Workload(tokens=layout.global_batch_size * gpt.seq_length,
                            flops=iteration_flops(gpt, layout.global_batch_size, args.recompute),
                            devices=layout.devices)
        peak = peak_of(args, dist)
        nodes = dist.node_count()
        with prepared.energy() as energy:
            result = training.train(backend, batches, dist, stop, warmup=args.warmup_iters,
                                    log_interval=args.log_interval,
                                    max_iterations=args.train_iters, workload=workload,
                                    timed_window=TimedWindow(energy, dist.sync))
        if dist.is_main:
            provenance.report_load_at_end()
        if peak.source == MEASURED and result.iterations >= args.train_iters:
            # On a shared host another job can hold a core for a whole window and
            # halve the measured rate; it rarely does so for both. A run stopped
            # by a signal or its budget reports at once instead.
            peak = Peak(max(peak.tflops, peak_of(args, dist).tflops), MEASURED)
    except torch.OutOfMemoryError:
        report.error(memory.out_of_memory(
            layout.micro_batch_size, dist.device, "lower --micro-batch-size (gradient "
            "accumulation keeps the global batch) or pass --recompute-activations full"))
        return 1
    summarise(args, dist, prepared, backend, workload, peak, nodes, result)
    return 0


def run(args: Args, stop: StopCondition) -> int:
    if args.backend == "megatron":
        # Megatron-core's overlap of tensor-parallel communication with
        # compute relies on one CUDA work queue; it must be set before CUDA starts.
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")
    try:
        dist = caraml_dist.init(args.device)
    except (RuntimeError, ValueError) as e:
        report.error(f"--device {args.device}: {e}")
        return 1
    try:
        return train_and_report(args, dist, stop)
    except BaseException as e:
        # A traceback keeps train_and_report's frame, and the model in it, alive.
        traceback.clear_frames(e.__traceback__)
        raise
    finally:
        dist.close()


def main(argv: list[str] | None = None) -> int:
    try:
        args = arguments.parse(argv)
    except BenchmarkInputError as e:
        report.error(str(e))
        return 2
    # From here on a signal ends the run with its summary, and the
    # wall-clock budget counts from here, as Megatron-LM's does from its start.
    budget = args.exit_duration_mins * 60 if args.exit_duration_mins else None
    with StopCondition(max_iterations=args.train_iters, max_seconds=budget) as stop:
        return run(args, stop)


if __name__ == "__main__":
    sys.exit(main())
