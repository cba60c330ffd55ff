"""The memory plan's bytes per layer against what each backend's GPT
keeps for its backward, measured on the CPU: the tensors autograd saves
in a forward (torch.autograd.graph.saved_tensors_hooks), counted once per
storage, parameters left out. Two model depths and two micro-batches
separate a layer's activations (per s b h) from what does not grow with the
batch (autocast's weight copies).

What differs on a GPU is faked at that boundary: dropout runs as CUDA's
fused kernel (torch.native_dropout, a one-byte mask; the CPU's dropout keeps
a mask of the input's type and the input), and the attention has no dropout,
since flash attention on a GPU keeps only its RNG state for it (the CPU's
SDPA falls back to the full score matrix)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from llm_training import gpt_torch, memory_plan
from llm_training.model_sizes import GPTConfig

S, H, HEADS, V = 256, 256, 4, 1024


def cuda_dropout(input, p=0.5, training=True, inplace=False):
    """F.dropout as at::dropout runs it on CUDA: the fused kernel."""
    return torch.native_dropout(input, p, training)[0] if training and p > 0 else input


def saved_bytes(model: torch.nn.Module, forward) -> int:
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward()
    return sum(storages.values())


def config(layers: int) -> GPTConfig:
    return GPTConfig(num_layers=layers, hidden_size=H, num_attention_heads=HEADS,
                     ffn_hidden_size=4 * H, seq_length=S, vocab_size=V, dropout=0.1)


def per_layer(measure) -> tuple[float, float]:
    """(bytes per s b h of one layer, bytes of one layer independent of the
    batch) from measure(layers, micro_batch)."""
    a = {(layers, b): measure(layers, b) for layers in (1, 2) for b in (1, 2)}
    layer_b2, layer_b1 = a[2, 2] - a[1, 2], a[2, 1] - a[1, 1]
    per_sample = layer_b2 - layer_b1
    return per_sample / (S * H), layer_b1 - per_sample


def torch_backend_saved(precision: str):
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[precision]

    def measure(layers: int, micro_batch: int) -> int:
        torch.manual_seed(0)
        model = gpt_torch.GPT(config(layers))
        for block in model.blocks:
            block.attention.dropout = 0.0
        tokens = torch.randint(V, (micro_batch, S))
        mask = torch.ones(micro_batch, S)

        def forward():
            with torch.autocast("cpu", dtype=dtype, enabled=precision != "fp32"):
                model(tokens, tokens, mask)
        return saved_bytes(model, forward)
    return measure


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_torch_backend_layer_bytes_match_the_plan(monkeypatch, precision):
    monkeypatch.setattr(F, "dropout", cuda_dropout)
    measured, batch_independent = per_layer(torch_backend_saved(precision))
    planned = memory_plan.layer_bytes_per_sbh("torch", precision)
    print(f"torch {precision}: {measured:.1f} bytes per s b h per layer (plan {planned})")
    assert planned == pytest.approx(measured, rel=0.10), f"measured {measured:.1f} per s b h"
    # autocast's 16-bit weight copies: the plan's 2 bytes per parameter
    layer_params = sum(p.numel() for p in gpt_torch.Block(config(1), False).parameters())
    copies = 2 * layer_params if precision == "bf16" else 0
    assert batch_independent == pytest.approx(copies, rel=0.10, abs=1024)


@pytest.fixture
def megatron_on_cpu(single_cpu, monkeypatch):
    pytest.importorskip("megatron.core")
    from megatron.core import parallel_state

    # megatron-core's rotary embedding moves its frequencies to the current CUDA device
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "cpu")
    parallel_state.initialize_model_parallel(1, 1)
    yield
    parallel_state.destroy_model_parallel()


def megatron_saved(precision: str):
    from megatron.core.transformer.module import Float16Module

    from llm_training import gpt_megatron

    def measure(layers: int, micro_batch: int) -> int:
        torch.manual_seed(0)
        cfg = config(layers)
        transformer = gpt_megatron.transformer_config(cfg, precision=precision,
                                                      cpu_initialization=True)
        transformer.attention_dropout = 0.0
        model = gpt_megatron.build_gpt(cfg, transformer)
        if precision != "fp32":
            model = Float16Module(transformer, model)
        tokens = torch.randint(V, (micro_batch, S))
        positions = torch.arange(S).unsqueeze(0).expand(micro_batch, S)
        return saved_bytes(model, lambda: model(tokens, positions, None, labels=tokens))
    return measure


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_megatron_layer_bytes_match_the_plan(megatron_on_cpu, monkeypatch, precision):
    monkeypatch.setattr(F, "dropout", cuda_dropout)
    measured, _ = per_layer(megatron_saved(precision))
    planned = memory_plan.layer_bytes_per_sbh("megatron", precision)
    print(f"megatron {precision}: {measured:.1f} bytes per s b h per layer (plan {planned})")
    assert planned == pytest.approx(measured, rel=0.10), f"measured {measured:.1f} per s b h"
