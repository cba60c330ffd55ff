"""The two backends build the same model: megatron-core's GPTModel (built on
the CPU in the driver's one-process gloo group) and the native torch GPT have the same
parameters, as many as flops.parameter_count says, and given the same
weights they compute the same loss."""

import math

import pytest
import torch

from caraml.node import dist
from llm_training.flops import parameter_count
from llm_training.gpt_torch import GPT
from llm_training.model_sizes import GPTConfig
from tests.dist_fixtures import LAUNCHER_VARIABLES

megatron = pytest.importorskip("megatron.core")
from megatron.core import parallel_state  # noqa: E402

from llm_training import gpt_megatron  # noqa: E402


@pytest.fixture(scope="module")
def model_parallel():
    """The driver's own one-process group, with tensor and pipeline parallel
    size 1, which megatron-core needs to build a model at all."""
    with pytest.MonkeyPatch.context() as env:
        for var in LAUNCHER_VARIABLES:
            env.delenv(var, raising=False)
        d = dist.init("cpu")
        parallel_state.initialize_model_parallel(1, 1)
        yield
        parallel_state.destroy_model_parallel()
        d.close()


def small(tie: bool, **kw) -> GPTConfig:
    shape = dict(num_layers=2, hidden_size=64, num_attention_heads=4, ffn_hidden_size=160,
                 seq_length=32, vocab_size=256, tie_embeddings=tie)
    return GPTConfig(**(shape | kw))


def megatron_gpt(cfg: GPTConfig):
    config = gpt_megatron.transformer_config(cfg, cpu_initialization=True)
    return gpt_megatron.build_gpt(cfg, config)


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("tie", [True, False])
def test_both_backends_have_the_counted_parameters(model_parallel, tie):
    cfg = small(tie)
    assert count(megatron_gpt(cfg)) == count(GPT(cfg)) == parameter_count(cfg)


def torch_to_megatron_names(cfg: GPTConfig):
    """(torch name, megatron name, how to convert the tensor)."""
    heads, d = cfg.num_attention_heads, cfg.head_dim

    def qkv_per_head(t):
        # torch: all queries, then all keys, then all values; megatron:
        # query, key and value of head 0, then of head 1, ...
        return t.view(3, heads, d, *t.shape[1:]).transpose(0, 1).reshape(t.shape)

    same = {"input_norm": "input_layernorm", "mlp_norm": "pre_mlp_layernorm",
            "attention.proj": "self_attention.linear_proj", "fc1": "mlp.linear_fc1",
            "fc2": "mlp.linear_fc2"}
    pairs = [("embedding.weight", "embedding.word_embeddings.weight", None),
             ("final_norm.weight", "decoder.final_layernorm.weight", None),
             ("final_norm.bias", "decoder.final_layernorm.bias", None)]
    if not cfg.tie_embeddings:
        pairs.append(("output.weight", "output_layer.weight", None))
    for i in range(cfg.num_layers):
        for kind in ("weight", "bias"):
            pairs.append((f"blocks.{i}.attention.qkv.{kind}",
                          f"decoder.layers.{i}.self_attention.linear_qkv.{kind}", qkv_per_head))
            for ours, theirs in same.items():
                pairs.append((f"blocks.{i}.{ours}.{kind}",
                              f"decoder.layers.{i}.{theirs}.{kind}", None))
    return pairs


@pytest.mark.parametrize("tie", [True, False])
def test_same_weights_give_the_same_loss(model_parallel, monkeypatch, tie):
    # megatron-core's rotary embedding moves its frequencies to
    # torch.cuda.current_device() in the forward pass; point that at the CPU.
    monkeypatch.setattr(torch.cuda, "current_device", lambda: "cpu")
    # Large weights, so any difference in the architecture shows in the loss.
    cfg = small(tie, dropout=0.0, init_std=0.3)
    torch.manual_seed(0)
    ours, theirs = GPT(cfg).eval(), megatron_gpt(cfg).eval()
    mine, megatron_params = dict(ours.named_parameters()), dict(theirs.named_parameters())
    pairs = torch_to_megatron_names(cfg)
    assert len(pairs) == len(mine) == len(megatron_params)
    with torch.no_grad():
        for name, megatron_name, convert in pairs:
            megatron_params[megatron_name].copy_((convert or (lambda t: t))(mine[name]))

    tokens = torch.randint(0, cfg.vocab_size, (2, cfg.seq_length))
    labels = torch.randint(0, cfg.vocab_size, (2, cfg.seq_length))
    positions = torch.arange(cfg.seq_length).expand(2, -1)
    with torch.no_grad():
        theirs_loss = theirs(tokens, positions, None, labels=labels).mean()
        ours_loss = ours(tokens, labels, torch.ones(2, cfg.seq_length))
    # Far from log(V), the loss of uniform logits: the weights matter.
    assert abs(theirs_loss.item() - math.log(cfg.vocab_size)) > 1.0
    # Tight enough to tell the exact GELU from the tanh approximation.
    torch.testing.assert_close(ours_loss, theirs_loss, rtol=1e-6, atol=1e-6)
