"""The GPT models the benchmark trains, in one place: their shapes, the
architecture settings both backends build from, and each size's default
parallel layout, batch, precision and recomputation.

The 800M, 13B and 175B sizes and their layouts are those of the CARAML paper
(upstream CARAML configuration for Megatron-LM); 117M is GPT-2 small, used on
Graphcore IPUs and small GPUs; cpu-small is sized to train at a few iterations
per second on a 2-core CPU host (see docs/llm_training.md for the measurement).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from caraml import report
from caraml.node import options

GPT2_VOCAB_SIZE = 50257

# Megatron-LM pads the vocabulary to a multiple of this times the tensor-parallel
# size (--make-vocab-size-divisible-by), so the embedding splits evenly over
# tensor-parallel ranks; both backends pad alike so their parameter counts agree.
VOCAB_DIVISIBLE_BY = 128

# tf32 is left out: the backends' fp32 paths (megatron-core's above all) are
# measured and tested in IEEE fp32 only.
PRECISIONS = tuple(p for p in options.PRECISIONS if p != "tf32")
RECOMPUTE_CHOICES = ("none", "selective", "full")


def padded_vocab_size(vocab_size: int, tensor_parallel: int) -> int:
    multiple = VOCAB_DIVISIBLE_BY * tensor_parallel
    return -(-vocab_size // multiple) * multiple


@dataclass(frozen=True)
class GPTConfig:
    """The architecture both backends build: a pre-norm GPT decoder with
    rotary position embeddings, biased linear layers, LayerNorm and
    tanh-approximated GELU: Megatron-core's GPTModel with its local or
    Transformer Engine layer spec and Megatron-LM's default fusions."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    ffn_hidden_size: int
    seq_length: int
    vocab_size: int  # already padded
    tie_embeddings: bool = True
    # Megatron-LM's defaults for --hidden-dropout and --attention-dropout
    dropout: float = 0.1
    init_std: float = 0.0048  # upstream CARAML's --init-method-std
    layernorm_eps: float = 1e-5
    rotary_base: int = 10000

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


@dataclass(frozen=True)
class ModelSize:
    """A named size: its shape and the defaults the driver's flags override."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    seq_length: int
    micro_batch_size: int
    precision: str
    ffn_hidden_size: int | None = None  # None: 4 x hidden_size
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    # A fixed global batch, or (None) micro-batch x data-parallel size x
    # gradient_accumulation, which grows with the number of devices.
    global_batch_size: int | None = None
    gradient_accumulation: int = 1
    # Nodes the benchmark's job asks for with this size (the JUBE script reads
    # it); None: as many as the system's default job
    nodes: int | None = None
    # auto: none where the model fits the device without, else full
    # (llm_training/memory_plan.py); selective saves nothing under flash attention
    recompute: str = "auto"
    sequence_parallel: bool = True
    distributed_optimizer: bool = True
    synthetic_vocab_size: int = GPT2_VOCAB_SIZE


SIZES: dict[str, ModelSize] = {
    # Tiny on purpose: a 2-core CPU must run several fp32 iterations per second,
    # and the vocabulary is small so the logits GEMM does not dominate.
    "cpu-small": ModelSize(
        num_layers=4, hidden_size=256, num_attention_heads=4, seq_length=256,
        micro_batch_size=4, global_batch_size=4, precision="fp32",
        recompute="none", sequence_parallel=False, distributed_optimizer=False,
        synthetic_vocab_size=4096,
    ),
    "117M": ModelSize(
        num_layers=12, hidden_size=768, num_attention_heads=12, seq_length=1024,
        micro_batch_size=8, precision="fp16",
    ),
    "800M": ModelSize(
        num_layers=16, hidden_size=2048, num_attention_heads=8, seq_length=2048,
        micro_batch_size=4, global_batch_size=512, precision="fp16",
    ),
    "13B": ModelSize(
        num_layers=40, hidden_size=5120, num_attention_heads=32, ffn_hidden_size=20480,
        seq_length=2048, tensor_parallel=2, pipeline_parallel=2, micro_batch_size=2,
        gradient_accumulation=64, precision="fp16", nodes=44,
    ),
    "175B": ModelSize(
        num_layers=96, hidden_size=12288, num_attention_heads=96, seq_length=2048,
        tensor_parallel=8, pipeline_parallel=8, micro_batch_size=2,
        gradient_accumulation=64, precision="bf16", nodes=16,
    ),
}



def main(argv: list[str]) -> int:
    """`python -m llm_training.model_sizes FIELD SIZE`: one field of a size
    (nodes, seq_length) as a JUBE shell-mode parameter's value, so the JUBE
    scripts read it from here instead of writing it again."""
    if len(argv) != 2 or argv[1] not in SIZES or argv[0] not in ModelSize.__dataclass_fields__:
        report.error(f"model_sizes: {' '.join(argv)!r} is not FIELD SIZE; sizes: {', '.join(SIZES)}")
        return 2
    report.parameter(str(getattr(SIZES[argv[1]], argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
