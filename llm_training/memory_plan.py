"""Activation recomputation and micro-batch size chosen from the device's
memory (`--recompute-activations auto`, `--micro-batch-size auto`):
recompute only when the model would not fit without, and the largest
micro-batch that fits, the global batch kept by gradient accumulation.

The estimate per device follows the count of Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models" (2022), with the bytes
a layer keeps per s b h / t measured rather than taken from the paper: the
tensors autograd saves in a forward of each backend's GPT on the CPU
(tests/gpu/test_memory_plan_measured.py checks the table below within 10 %),
with the attention the suite runs (flash kernels through SDPA or Transformer
Engine keep no sequence x sequence scores) and dropout as CUDA's fused kernel
keeps it (one-byte masks). The torch backend keeps more than megatron-core
at 16 bit: its residual stream and layer-norm inputs stay fp32 under
autocast. Megatron's selective recomputation (of the core attention) saves
nothing under flash attention and is never chosen; full recomputation keeps
each layer's input. The first pipeline stage holds one micro-batch per stage
in flight (1F1B), which makes its activations those of all layers.

Weights, gradients and Adam states take 16 to 18 bytes per parameter, the
optimizer's share divided by the data-parallel ranks where it is sharded;
the torch backend adds the 16-bit weight copies autocast keeps for the
backward, and DDP's gradient buckets where it runs data parallel. The
logits take 10 bytes per element at the end of the forward (16-bit logits,
their fp32 copy and the fp32 log-softmax the loss keeps). A fraction of the
device is kept free for the CUDA context, communication buffers and the
allocator's fragmentation."""

from __future__ import annotations

from dataclasses import dataclass

from llm_training.arguments import Args, Layout
from llm_training.flops import parameter_count
from llm_training.model_sizes import GPTConfig

USABLE_FRACTION = 0.85
MICRO_BATCH_CAP = 16  # beyond this a GPU gains little and the logits grow

# Bytes a transformer layer keeps for its backward per s b h / t, by backend
# and the width of the numbers it computes with (16: fp16/bf16, 32: fp32).
LAYER_BYTES_PER_SBH = {("megatron", 16): 38, ("megatron", 32): 74,
                       ("torch", 16): 42, ("torch", 32): 74}
LOGIT_BYTES = 10


@dataclass(frozen=True)
class Plan:
    recompute: str
    micro_batch_size: int
    estimate_gib: float
    usable_gib: float


def state_bytes_per_parameter(backend: str, precision: str, sharded_over: int,
                              data_parallel: int = 1) -> float:
    """Weights, gradients and optimizer states of one parameter, and the
    copies the backend keeps of them."""
    if backend == "megatron" and precision != "fp32":
        # 16-bit weights; gradients in fp32 for bf16 (grad_reduce_in_fp32),
        # in the weights' type for fp16; fp32 main weights and Adam's moments.
        grads = 4 if precision == "bf16" else 2
        return 2 + grads + 12 / sharded_over
    # fp32 weights and gradients (autocast computes in 16 bit), Adam's moments
    states = 4 + 4 + 8 / sharded_over
    if backend == "torch" and precision != "fp32":
        states += 2  # autocast's 16-bit weight copies, saved for the backward
    if backend == "torch" and data_parallel > 1:
        states += 4  # DDP's gradient buckets beside the gradients
    return states


def layer_bytes_per_sbh(backend: str, precision: str) -> int:
    return LAYER_BYTES_PER_SBH[(backend, 32 if precision == "fp32" else 16)]


def estimate_bytes(gpt: GPTConfig, layout: Layout, args: Args, recompute: str,
                   micro_batch: int) -> float:
    tp, pp = layout.tensor_parallel, layout.pipeline_parallel
    params = parameter_count(gpt) / (tp * pp)
    sharded = layout.data_parallel if args.distributed_optimizer else 1
    states = params * state_bytes_per_parameter(args.backend, args.precision, sharded,
                                                layout.data_parallel)
    sbh = gpt.seq_length * micro_batch * gpt.hidden_size / tp
    layer = layer_bytes_per_sbh(args.backend, args.precision)
    # full recomputation keeps each layer's input: 16-bit in megatron-core,
    # the fp32 residual stream in the torch backend and at fp32
    layer_input = 2 if args.backend == "megatron" and args.precision != "fp32" else 4
    per_layer = {"none": layer, "selective": layer, "full": layer_input}[recompute] * sbh
    # the layer being recomputed holds its full activations during backward
    working = layer * sbh if recompute == "full" else 0
    activations = gpt.num_layers * per_layer + working
    logits = LOGIT_BYTES * gpt.seq_length * micro_batch * gpt.vocab_size / tp
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
