"""Megatron-core's GPTModel set up as the architecture in
model_sizes.GPTConfig, the one gpt_torch builds.

Layer spec: Transformer Engine's where it imports (its attention picks
flash or fused kernels); otherwise megatron-core's local spec with the core
attention done by torch's scaled_dot_product_attention, which has flash and
memory-efficient kernels on CUDA and ROCm (megatron-core's own local
attention materialises the full score matrix). Whether Transformer Engine
and Apex are there is megatron-core's own finding (HAVE_TE, HAVE_APEX of
its GPT layer specs), after optional_kernels has hidden an installed one
that fails to import (built against another torch or CUDA).
"""

from __future__ import annotations

import dataclasses
from contextlib import nullcontext
from typing import Any

import torch.nn.functional as F

# Before megatron-core, which imports Transformer Engine and Apex itself.
from llm_training import optional_kernels  # noqa: F401

# isort: split
from megatron.core import tensor_parallel
from megatron.core.models.gpt import GPTModel, gpt_layer_specs
from megatron.core.models.gpt.gpt_layer_specs import (
    get_gpt_layer_local_spec,
    get_gpt_layer_with_transformer_engine_spec,
)
from megatron.core.transformer import TransformerConfig
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.spec_utils import ModuleSpec

from caraml.node.precision import DTYPES
from llm_training.model_sizes import GPTConfig

HAVE_TRANSFORMER_ENGINE = gpt_layer_specs.HAVE_TE
HAVE_APEX = gpt_layer_specs.HAVE_APEX


class SdpaCoreAttention(MegatronModule):
    """Causal core attention through torch's scaled_dot_product_attention,
    with megatron-core's core-attention interface ([s, b, heads, d] in,
    [s, b, heads * d] out)."""

    def __init__(self, config: TransformerConfig, layer_number: int, attn_mask_type: Any,
                 attention_type: str, attention_dropout: float | None = None,
                 softmax_scale: float | None = None, cp_comm_type: str | None = None,
                 pg_collection: Any = None):
        super().__init__(config=config)
        self.dropout = config.attention_dropout if attention_dropout is None else attention_dropout
        self.softmax_scale = softmax_scale

    def forward(self, query, key, value, attention_mask, attn_mask_type=None,
                attention_bias=None, packed_seq_params=None):
        if attention_bias is not None or packed_seq_params is not None:
            raise NotImplementedError("SdpaCoreAttention supports plain causal attention only")
        s, b = query.shape[:2]
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
        p = self.dropout if self.training else 0.0
        # Tensor-parallel ranks hold different heads, so they draw their
        # dropout masks from megatron's model-parallel RNG stream, as
        # megatron-core's own core attention does outside sequence parallelism.
        rng = (tensor_parallel.get_cuda_rng_tracker().fork()
               if p > 0 and not self.config.sequence_parallel else nullcontext())
        with rng:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True,
                                                 scale=self.softmax_scale)
        return out.permute(2, 0, 1, 3).reshape(s, b, -1)


def attention_implementation() -> str:
    return "transformer-engine" if HAVE_TRANSFORMER_ENGINE else "torch-sdpa"


def layer_spec() -> ModuleSpec:
    if HAVE_TRANSFORMER_ENGINE:
        return get_gpt_layer_with_transformer_engine_spec()
    spec = get_gpt_layer_local_spec()
    attention = spec.submodules.self_attention
    return dataclasses.replace(spec, submodules=dataclasses.replace(
        spec.submodules,
        self_attention=dataclasses.replace(attention, submodules=dataclasses.replace(
            attention.submodules, core_attention=SdpaCoreAttention)),
    ))


def transformer_config(cfg: GPTConfig, *, tensor_parallel_size: int = 1,
                       pipeline_parallel_size: int = 1, sequence_parallel: bool = False,
                       precision: str = "fp32", recompute: str = "none",
                       cpu_initialization: bool = False) -> TransformerConfig:
    dtype = DTYPES[precision]
    recompute_settings = {
        "none": {},
        "selective": {"recompute_granularity": "selective"},  # the core attention
        "full": {"recompute_granularity": "full", "recompute_method": "uniform",
                 "recompute_num_layers": 1},  # every layer
    }[recompute]
    return TransformerConfig(
        num_layers=cfg.num_layers,
        hidden_size=cfg.hidden_size,
        num_attention_heads=cfg.num_attention_heads,
        ffn_hidden_size=cfg.ffn_hidden_size,
        hidden_dropout=cfg.dropout,
        attention_dropout=cfg.dropout,
        layernorm_epsilon=cfg.layernorm_eps,
        init_method_std=cfg.init_std,
        tensor_model_parallel_size=tensor_parallel_size,
        pipeline_model_parallel_size=pipeline_parallel_size,
        sequence_parallel=sequence_parallel,
        fp16=precision == "fp16",
        bf16=precision == "bf16",
        params_dtype=dtype,
        pipeline_dtype=dtype,
        # Megatron-LM's default fusions (jit-compiled, no extension needed).
        bias_activation_fusion=True,
        bias_dropout_fusion=True,
        apply_rope_fusion=HAVE_TRANSFORMER_ENGINE,
        use_cpu_initialization=cpu_initialization,
        **recompute_settings,
    )


def build_gpt(cfg: GPTConfig, config: TransformerConfig, *, pre_process: bool = True,
              post_process: bool = True) -> GPTModel:
    """This pipeline stage's part of the model (all of it without pipelining)."""
    return GPTModel(
        config=config,
        transformer_layer_spec=layer_spec(),
        vocab_size=cfg.vocab_size,
        max_sequence_length=cfg.seq_length,
        pre_process=pre_process,
        post_process=post_process,
        share_embeddings_and_output_weights=cfg.tie_embeddings,
        position_embedding_type="rope",
        rotary_base=cfg.rotary_base,
    )
