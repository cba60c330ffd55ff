"""Parameter and FLOP counts of the GPT in model_sizes.GPTConfig; both
backends report these, so their figures compare.

FLOPs follow Narayanan et al., SC21 ("Efficient large-scale language model
training on GPU clusters using Megatron-LM"): only matrix multiplications
count, at two FLOPs per multiply-add; attention scores are counted over the
whole s x s matrix (as in the paper, not halved for the causal mask); the
backward pass costs twice the forward. For ffn = 4h this gives the paper's
72 B s l h^2 (1 + s/6h + V/12lh) per iteration without recomputation, and
96 B s l h^2 (1 + s/6h + V/16lh) with full recomputation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from llm_training.model_sizes import GPTConfig


def parameter_count(cfg: GPTConfig) -> int:
    h, f, v = cfg.hidden_size, cfg.ffn_hidden_size, cfg.vocab_size
    per_layer = (
        2 * h  # input LayerNorm, weight and bias
        + 3 * h * h + 3 * h  # fused query/key/value projection
        + h * h + h  # attention output projection
        + 2 * h  # pre-MLP LayerNorm
        + h * f + f  # MLP up-projection
        + f * h + h  # MLP down-projection
    )
    embedding = v * h  # rotary position embeddings have no parameters
    final_norm = 2 * h
    output = 0 if cfg.tie_embeddings else v * h
    return embedding + cfg.num_layers * per_layer + final_norm + output


@dataclass(frozen=True)
class IterationFlops:
    model: int  # forward and backward of the model: the numerator of MFU
    hardware: int  # what the device executes: model plus recomputed forward work


def iteration_tokens(cfg: GPTConfig, global_batch_size: int) -> int:
    return global_batch_size * cfg.seq_length


def iteration_flops(cfg: GPTConfig, global_batch_size: int, recompute: str) -> IterationFlops:
    s, h, f = cfg.seq_length, cfg.hidden_size, cfg.ffn_hidden_size
    tokens = iteration_tokens(cfg, global_batch_size)
    # Per token and layer, forward: QKV (3h^2), output projection (h^2) and
    # the two MLP GEMMs (2hf) ...
    dense = 2 * (3 * h * h + h * h + 2 * h * f)
    # ... and the attention scores Q K^T and the score-weighted sum of V,
    # each a row of s dot products of length h.
    attention = 2 * (2 * s * h)
    logits = 2 * h * cfg.vocab_size
    forward_layers = tokens * cfg.num_layers * (dense + attention)
    model = 3 * (forward_layers + tokens * logits)
    recomputed = {
        "none": 0,
        "selective": tokens * cfg.num_layers * attention,  # only the attention core is redone
        "full": forward_layers,  # every transformer layer's forward is redone
    }[recompute]
    return IterationFlops(model=model, hardware=model + recomputed)


def iteration_record(cfg: GPTConfig, global_batch_size: int, recompute: str) -> dict:
    """What one training iteration does, as a run keeps it with its timed
    iterations (caraml/node/iterations.py): its tokens and FLOPs, and the
    model and batch they were counted for, from which recounted() counts
    them again."""
    model = {**dataclasses.asdict(cfg), "global_batch_size": global_batch_size, "recompute": recompute}
    return {"unit": "tokens", **recounted(model), "model": model}


def recounted(model: Mapping[str, object]) -> dict[str, int]:
    """One iteration's tokens, model and hardware FLOPs and the model's
    parameters, counted from the model and batch a run recorded: the
    formula the audit of an LLM row runs (the benchmark table names it,
    caraml/benchmarks.py). KeyError or TypeError where the record lacks a
    part of the model."""
    shape = {f.name for f in dataclasses.fields(GPTConfig)}
    cfg = GPTConfig(**{key: value for key, value in model.items() if key in shape})
    batch, recompute = int(model["global_batch_size"]), str(model["recompute"])
    flops = iteration_flops(cfg, batch, recompute)
    return {"work_per_iteration": iteration_tokens(cfg, batch), "model_flops_per_iteration": flops.model,
            "hardware_flops_per_iteration": flops.hardware, "params": parameter_count(cfg)}
