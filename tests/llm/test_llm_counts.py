"""Parameter and FLOP counts against values worked out by hand.

Parameters of the GPT (pre-norm, biased linears, LayerNorm, rotary
embeddings without parameters), for hidden size h, ffn 4h, L layers and
padded vocabulary V:
    per layer  2h (LN) + 3h^2+3h (QKV) + h^2+h (proj) + 2h (LN)
               + 4h^2+4h (fc1) + 4h^2+h (fc2)            = 12h^2 + 13h
    model      V h + L (12h^2 + 13h) + 2h (final LN)     (+ V h untied)
FLOPs per iteration, Narayanan et al. (SC21), global batch B, sequence s:
    72 B s L h^2 (1 + s/6h + V/12Lh) = 72 B s L h^2 + 12 B s^2 L h + 6 B s h V
selective recomputation adds the attention core's forward, 4 B s^2 L h;
full recomputation adds every layer's forward, B s L (24 h^2 + 4 s h).
Vocabulary 50257 padded to a multiple of 128 x TP: 50304 (TP 1),
50432 (TP 2), 51200 (TP 8).
"""

from fractions import Fraction

import pytest

from llm_training import arguments
from llm_training.flops import iteration_flops, parameter_count
from llm_training.model_sizes import GPTConfig, padded_vocab_size


def size_config(name: str, *flags: str) -> GPTConfig:
    """The model the driver builds for a size, from its command line."""
    args = arguments.parse(["--backend", "megatron", "--model-size", name, "--synthetic",
                            "--train-iters", "2", "--energy-methods", "none", *flags])
    return arguments.gpt_config(args, 50257)


@pytest.mark.parametrize("vocab, tp, padded", [(50257, 1, 50304), (50257, 2, 50432),
                                               (50257, 8, 51200), (4096, 1, 4096)])
def test_vocabulary_is_padded_like_megatron(vocab, tp, padded):
    assert padded_vocab_size(vocab, tp) == padded


@pytest.mark.parametrize("name, tied, untied", [
    # 117M: h 768, L 12, V 50304: 12 x (7,077,888 + 9,984) + 38,633,472 + 1,536
    ("117M", 123_689_472, 162_322_944),
    # 800M: h 2048, L 16, V 50304: 16 x (50,331,648 + 26,624) + 103,022,592 + 4,096
    ("800M", 908_759_040, 1_011_781_632),
    # 13B: h 5120, L 40, TP 2 so V 50432: 40 x (314,572,800 + 66,560) + 258,211,840 + 10,240
    ("13B", 12_843_796_480, 13_102_008_320),
    # 175B: h 12288, L 96, TP 8 so V 51200: 96 x (1,811,939,328 + 159,744) + 629,145,600 + 24,576
    ("175B", 174_590_681_088, 175_219_826_688),
])
def test_parameter_counts_of_the_paper_sizes(name, tied, untied):
    assert parameter_count(size_config(name)) == tied
    cfg = size_config(name, "--untie-embeddings-and-output-weights")
    assert parameter_count(cfg) == untied


@pytest.mark.parametrize("name, batch, model_flops, selective_extra", [
    # 72*8*1024*12*768^2 + 12*8*1024^2*12*768 + 6*8*1024*768*50304
    ("117M", 8, 7_001_333_563_392, 4 * 8 * 1024**2 * 12 * 768),
    # 72*512*2048*16*2048^2 + 12*512*2048^2*16*2048 + 6*512*2048*2048*50304
    ("800M", 512, 6_559_136_615_497_728, 281_474_976_710_656),
    # 72*128*2048*40*5120^2 + 12*128*2048^2*40*5120 + 6*128*2048*5120*50432
    ("13B", 128, 21_516_755_360_808_960, 439_804_651_110_400),
])
def test_flops_of_the_paper_sizes(name, batch, model_flops, selective_extra):
    cfg = size_config(name)
    assert iteration_flops(cfg, batch, "none").model == model_flops
    assert iteration_flops(cfg, batch, "none").hardware == model_flops
    selective = iteration_flops(cfg, batch, "selective")
    assert selective.model == model_flops  # recomputation is not model work
    assert selective.hardware == model_flops + selective_extra


def test_175b_flops_with_full_recomputation_match_the_papers_closed_form():
    cfg = size_config("175B")
    B, s, L, h, V = 1024, 2048, 96, 12288, 51200
    flops = iteration_flops(cfg, B, "full")
    assert flops.model == 2_257_464_497_591_549_952
    # the paper's 96 B s L h^2 (1 + s/6h + V/16Lh) for full recomputation
    closed_form = 96 * B * s * L * h**2 * (1 + Fraction(s, 6 * h) + Fraction(V, 16 * L * h))
    assert flops.hardware == closed_form == 3_007_313_835_548_737_536


def test_ffn_other_than_4h():
    # L 2, h 64, ffn 100, V 256, s 32, B 3 (96 tokens), by hand:
    # params: V h = 16,384; per layer 4h^2 + 2hf + 9h + f = 16,384 + 12,800 + 576 + 100
    #         = 29,860; final LN 128 -> 16,384 + 2 x 29,860 + 128 = 76,232
    # forward per token: layers 2 x (2(4h^2 + 2hf) + 4sh) = 2 x (58,368 + 8,192),
    #         logits 2hV = 32,768 -> 165,888; x 96 tokens x 3 = 47,775,744
    cfg = GPTConfig(num_layers=2, hidden_size=64, num_attention_heads=4, ffn_hidden_size=100,
                    seq_length=32, vocab_size=256)
    assert parameter_count(cfg) == 76_232
    assert iteration_flops(cfg, 3, "none").model == 47_775_744
    assert iteration_flops(cfg, 3, "selective").hardware == 47_775_744 + 96 * 2 * 8_192
    assert iteration_flops(cfg, 3, "full").hardware == 47_775_744 + 96 * 2 * 66_560
