"""The driver's command line: the model size's defaults, what flags
override, and the one-line messages for bad input. All of it runs without
torch, as on a login node."""

import subprocess

import pytest
from llm_helpers import PYTHON, REPO

from caraml.report import BenchmarkInputError
from llm_training.arguments import parse, resolve_layout

BASE = ["--synthetic", "--train-iters", "10", "--energy-methods", "none"]


def args_for(*flags: str):
    return parse([*BASE, *flags])


def test_validation_needs_no_torch():
    code = ("import sys; from llm_training.arguments import parse, resolve_layout; "
            "a = parse(['--model-size', '800M', '--synthetic', '--train-iters', '5', "
            "'--energy-dir', 'e']); resolve_layout(a, 4); "
            "sys.exit('torch' in sys.modules)")
    assert subprocess.run([PYTHON, "-c", code], cwd=REPO).returncode == 0


def test_defaults_come_from_the_model_size():
    a = args_for("--backend", "megatron", "--model-size", "13B")
    shape = (a.num_layers, a.hidden_size, a.num_attention_heads, a.ffn_hidden_size)
    assert shape == (40, 5120, 32, 20480)
    assert (a.tensor_parallel, a.pipeline_parallel, a.micro_batch_size) == (2, 2, 2)
    assert (a.precision, a.recompute, a.sequence_parallel, a.distributed_optimizer) == (
        "fp16", "auto", True, True)
    layout = resolve_layout(a, world_size=16)  # DP 4, 64 micro-batches of 2 each
    assert (layout.data_parallel, layout.global_batch_size, layout.microbatches) == (4, 512, 64)
    assert layout.sequence_parallel


def test_800m_has_a_fixed_global_batch_and_no_sequence_parallelism_without_tp():
    layout = resolve_layout(args_for("--model-size", "800M", "--energy-dir", "e"), world_size=4)
    assert (layout.data_parallel, layout.global_batch_size, layout.microbatches) == (4, 512, 32)
    assert not layout.sequence_parallel  # asked for, but tensor parallelism is 1


def test_flags_override_the_size():
    a = args_for("--model-size", "800M", "--num-layers", "4", "--hidden-size", "256",
                 "--num-attention-heads", "4", "--seq-length", "128", "--precision", "bf16",
                 "--recompute-activations", "full", "--micro-batch-size", "2",
                 "--global-batch-size", "16", "--no-sequence-parallel",
                 "--no-use-distributed-optimizer", "--untie-embeddings-and-output-weights")
    assert (a.num_layers, a.hidden_size, a.ffn_hidden_size, a.seq_length) == (4, 256, 1024, 128)
    assert (a.precision, a.recompute) == ("bf16", "full")
    assert (a.micro_batch_size, a.global_batch_size) == (2, 16)
    assert not (a.sequence_parallel or a.distributed_optimizer)
    assert a.untie_embeddings


def test_flags_can_come_from_a_file(tmp_path):
    # JUBE's data step writes the data flags into a file the driver reads with @
    data_args = tmp_path / "data.args"
    data_args.write_text("--data-path\n/data/oscar_text_document\n--vocab-file\nv.json\n"
                         "--merge-file\nm.txt\n")
    a = parse([f"@{data_args}", "--model-size", "cpu-small", "--train-iters", "10",
               "--energy-methods", "none"])
    assert (a.data_path, a.vocab_file, a.merge_file, a.vocab_size) == (
        "/data/oscar_text_document", "v.json", "m.txt", None)


def test_synthetic_vocabulary_defaults_to_the_sizes():
    assert args_for("--model-size", "cpu-small").vocab_size == 4096
    assert args_for("--model-size", "800M").vocab_size == 50257
    assert args_for("--model-size", "800M", "--vocab-size", "1000").vocab_size == 1000


@pytest.mark.parametrize("flags, world_size, message", [
    (["--model-size", "42B"], 1,
     "unknown model size '42B'; choose one of cpu-small 117M 800M 13B 175B"),
    (["--backend", "megatron", "--model-size", "13B"], 6,
     "tensor x pipeline parallel size 2 x 2 = 4 does not divide the 6 devices"),
    (["--model-size", "800M", "--global-batch-size", "20"], 4,
     "global batch size 20 is not divisible by micro-batch size 4 x data-parallel size 4"),
    (["--model-size", "800M", "--tensor-model-parallel-size", "2"], 2,
     "the torch backend has data parallelism only but tensor x pipeline parallel size is 2 x 1"),
    (["--model-size", "cpu-small", "--warmup-iters", "10"], 1,
     "--train-iters 10 leaves no timed iteration after 10 warm-up iterations"),
    (["--model-size", "cpu-small", "--hidden-size", "100", "--num-attention-heads", "3"], 1,
     "hidden size 100 does not divide by 3 attention heads"),
    (["--model-size", "cpu-small", "--precision", "fp8"], 1,
     "argument --precision: invalid choice: 'fp8'"),
    (["--model-size", "cpu-small", "--micro-batch-size", "0"], 1,
     "argument --micro-batch-size: must be a positive integer or auto (got 0)"),
    (["--model-size", "cpu-small", "--energy-methods", "auto"], 1,
     "--energy-dir is needed to measure energy"),
    (["--backend", "megatron", "--model-size", "cpu-small",
      "--pipeline-model-parallel-size", "3"], 3,
     "4 layers do not split evenly over 3 pipeline stages"),
])
def test_bad_input_is_named(flags, world_size, message):
    with pytest.raises(BenchmarkInputError) as e:
        resolve_layout(parse([*BASE, *flags]), world_size)
    assert message in str(e.value)


@pytest.mark.parametrize("flags, message", [
    (["--model-size", "cpu-small", "--train-iters", "4", "--energy-methods", "none"],
     "give either --data-path (with --vocab-file and --merge-file) or --synthetic"),
    (["--model-size", "cpu-small", "--train-iters", "4", "--energy-methods", "none",
      "--data-path", "x"], "--data-path needs --vocab-file and --merge-file"),
    (["--model-size", "cpu-small", "--synthetic", "--energy-methods", "none"],
     "the following arguments are required: --train-iters"),
])
def test_missing_input_is_named(flags, message):
    with pytest.raises(BenchmarkInputError) as e:
        parse(flags)
    assert message in str(e.value)
