"""A native PyTorch GPT with the architecture of Megatron-core's GPTModel
(pre-norm, rotary position embeddings, biased linear layers, LayerNorm,
tanh-approximated GELU, tied or untied output layer): given the same weights
it computes the same loss, so both backends train the same model. It runs on
any device torch supports."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from llm_training.model_sizes import GPTConfig


class Rotary(nn.Module):
    """Rotary position embedding over the whole head dimension, rotating
    the two halves of each head (Megatron's non-interleaved layout)."""

    def __init__(self, head_dim: int, seq_length: int, base: int):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        angles = torch.outer(torch.arange(seq_length, dtype=torch.float32), inv_freq)
        cos, sin = angles.cos(), angles.sin()
        # The rotation pairs element i with i + d/2: x * cos + swap_halves(x) * sin,
        # with sin negated on the first half, so no separate negation is needed.
        self.register_buffer("cos", torch.cat((cos, cos), -1)[:, None, None, :], persistent=False)
        self.register_buffer("sin", torch.cat((-sin, sin), -1)[:, None, None, :], persistent=False)
        self._cast: dict[torch.dtype, tuple[torch.Tensor, torch.Tensor]] = {}

    def forward(self, seq_length: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin ([s, 1, 1, head_dim]) for the first `seq_length`
        positions, in `dtype`: under autocast the rotated tensors are 16-bit,
        and fp32 tables would promote them to fp32."""
        if dtype not in self._cast or self._cast[dtype][0].device != self.cos.device:
            self._cast[dtype] = (self.cos.to(dtype), self.sin.to(dtype))
        cos, sin = self._cast[dtype]
        return cos[:seq_length], sin[:seq_length]


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Applies the rotation to x: [b, s, ..., head_dim]."""
    return x * cos + x.roll(x.size(-1) // 2, dims=-1) * sin


class SelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig, recompute_core: bool):
        super().__init__()
        self.heads = cfg.num_attention_heads
        self.dropout = cfg.dropout
        self.recompute_core = recompute_core
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size)
        self.proj = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def _core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        p = self.dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        b, s, h = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.heads, h // self.heads)
        # One rotation for queries and keys together: half the element-wise kernels.
        q, k = rotate(qkv[:, :, :2], *rope).transpose(1, 3).unbind(2)  # [b, heads, s, d]
        v = qkv[:, :, 2].transpose(1, 2)
        if self.recompute_core and self.training:
            # Selective recomputation (Korthikanti et al.): the attention core
            # is cheap to redo and its activations are the largest.
            y = checkpoint(self._core, q, k, v, use_reentrant=False)
        else:
            y = self._core(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, s, h))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, recompute_core: bool):
        super().__init__()
        self.input_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layernorm_eps)
        self.attention = SelfAttention(cfg, recompute_core)
        self.mlp_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layernorm_eps)
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.ffn_hidden_size)
        self.fc2 = nn.Linear(cfg.ffn_hidden_size, cfg.hidden_size)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x = x + self.dropout(self.attention(self.input_norm(x), rope))
        # tanh-approximated GELU, as Megatron's fused bias-GELU (and GPT-2) compute it
        return x + self.dropout(self.fc2(F.gelu(self.fc1(self.mlp_norm(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, recompute: str = "none"):
        super().__init__()
        self.cfg = cfg
        self.recompute_layers = recompute == "full"
        self.embedding = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.dropout = nn.Dropout(cfg.dropout)
        self.rotary = Rotary(cfg.head_dim, cfg.seq_length, cfg.rotary_base)
        self.blocks = nn.ModuleList(
            Block(cfg, recompute == "selective") for _ in range(cfg.num_layers))
        self.final_norm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layernorm_eps)
        self.output = (None if cfg.tie_embeddings
                       else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False))
        self._init_weights()

    def _init_weights(self) -> None:
        # Megatron's initialisation: normal(0, std) for weights, zero biases,
        # and std / sqrt(2 layers) for the layers that write into the residual stream.
        std = self.cfg.init_std
        for name, p in self.named_parameters():
            if "norm" in name:
                continue
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif name.endswith(("proj.weight", "fc2.weight")):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * self.cfg.num_layers))
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor,
                loss_mask: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy over the tokens the mask keeps."""
        x = self.dropout(self.embedding(tokens))
        rope = self.rotary(tokens.size(1), torch.get_autocast_dtype(x.device.type)
                           if torch.is_autocast_enabled(x.device.type) else x.dtype)
        for block in self.blocks:
            if self.recompute_layers and self.training:
                x = checkpoint(block, x, rope, use_reentrant=False)
            else:
                x = block(x, rope)
        x = self.final_norm(x)
        weight = self.embedding.weight if self.output is None else self.output.weight
        logits = F.linear(x, weight)
        losses = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), reduction="none")
        mask = loss_mask.flatten().to(losses.dtype)
        return (losses * mask).sum() / mask.sum().clamp(min=1.0)
