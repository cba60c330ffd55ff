"""Activation recomputation and micro-batch size chosen from the device's
memory (`--recompute-activations auto`, `--micro-batch-size auto`):
recompute only when the model would not fit without, and the largest
micro-batch that fits, the global batch kept by gradient accumulation.

The estimate per device follows Korthikanti et al., "Reducing Activation
Recomputation in Large Transformer Models" (2022), for the attention the
suite runs: flash kernels through SDPA or Transformer Engine keep no
sequence x sequence scores, so a layer stores 34 s b h / t bytes at 16 bit
(68 at fp32), and Megatron's selective recomputation (of the core attention)
saves nothing and is never chosen; full recomputation keeps each layer's
input (2 s b h / t). The first pipeline stage holds one micro-batch per
stage in flight (1F1B), which makes its activations those of all layers.
Weights, gradients and Adam states take 16 to 18 bytes per parameter,
the optimizer's share divided by the data-parallel ranks where it is
sharded; the logits take 10 bytes per element (16-bit logits, fp32 loss and
its gradient). A fraction of the device is kept free for the CUDA context,
communication buffers and the allocator's fragmentation."""

from __future__ import annotations

from dataclasses import dataclass

from llm_training.arguments import Args, Layout
from llm_training.flops import parameter_count
from llm_training.model_sizes import GPTConfig

USABLE_FRACTION = 0.85
MICRO_BATCH_CAP = 16  # beyond this a GPU gains little and the logits grow


@dataclass(frozen=True)
class Plan:
    recompute: str
    micro_batch_size: int
    estimate_gib: float
    usable_gib: float


def state_bytes_per_parameter(backend: str, precision: str, sharded_over: int) -> float:
    """Weights, gradients and optimizer states of one parameter."""
    if backend == "megatron" and precision != "fp32":
        # 16-bit weights; gradients in fp32 for bf16 (grad_reduce_in_fp32),
        # in the weights' type for fp16; fp32 main weights and Adam's moments.
        grads = 4 if precision == "bf16" else 2
        return 2 + grads + 12 / sharded_over
    # fp32 weights and gradients (autocast computes in 16 bit), Adam's moments
    return 4 + 4 + 8 / sharded_over


def estimate_bytes(gpt: GPTConfig, layout: Layout, args: Args, recompute: str,
                   micro_batch: int) -> float:
    tp, pp = layout.tensor_parallel, layout.pipeline_parallel
    params = parameter_count(gpt) / (tp * pp)
    sharded = layout.data_parallel if args.distributed_optimizer else 1
    states = params * state_bytes_per_parameter(args.backend, args.precision, sharded)
    sbh = gpt.seq_length * micro_batch * gpt.hidden_size / tp
    per_layer = {"none": 34, "selective": 34, "full": 2}[recompute] * sbh
    if args.precision == "fp32":
        per_layer *= 2
    # the layer being recomputed holds its full activations during backward
    working = 34 * sbh if recompute == "full" else 0
    activations = gpt.num_layers * per_layer + working
    logits = 10 * gpt.seq_length * micro_batch * gpt.vocab_size / tp
    return states + activations + logits


def choose(gpt: GPTConfig, layout: Layout, args: Args, device_bytes: float,
           auto_recompute: bool, auto_micro_batch: bool) -> Plan:
    """The plan for what is `auto`: no recomputation where it fits, else
    full; the largest micro-batch (dividing the data-parallel rank's batch)
    that fits. Where nothing fits, the smallest footprint, whose estimate the
    row then shows beside the out-of-memory error."""
    usable = USABLE_FRACTION * device_bytes
    per_rank = layout.global_batch_size // layout.data_parallel
    batches = ([m for m in range(min(per_rank, MICRO_BATCH_CAP), 0, -1) if per_rank % m == 0]
               if auto_micro_batch else [layout.micro_batch_size])
    recomputes = ["none", "full"] if auto_recompute else [args.recompute]
    candidates = [(r, m) for r in recomputes for m in batches]
    fitting = [(r, m) for r, m in candidates
               if estimate_bytes(gpt, layout, args, r, m) <= usable]
    recompute, micro = fitting[0] if fitting else candidates[-1]
    return Plan(recompute, micro, estimate_bytes(gpt, layout, args, recompute, micro) / 2**30,
                usable / 2**30)
