"""The driver's command line and the checks of what it asks for. Pure
Python (no torch), so a login node or a pre-flight check can validate a
configuration without a framework installed:

    from llm_training.arguments import parse, resolve_layout
    layout = resolve_layout(parse(argv), world_size=8)  # raises BenchmarkInputError
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from caraml import device_peaks
from caraml.node.options import (
    POSITIVE,
    DriverOptions,
    TrainingOptions,
    derived,
    option,
)
from caraml.node.options import parse as parse_options
from caraml.report import BenchmarkInputError
from llm_training.model_sizes import (
    PRECISIONS,
    RECOMPUTE_CHOICES,
    SIZES,
    GPTConfig,
    padded_vocab_size,
)

BACKENDS = ("torch", "megatron")
PROG = "python -m llm_training.pretrain_gpt"
FROM_SIZE = " (default: the model size's)"


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Model, backend and peak (a field left None takes the model size's value)."""

    backend: str = option("torch", choices=BACKENDS, doc="megatron-core or native PyTorch")
    model_size: str = option(required=True, doc=f"one of {', '.join(SIZES)}")
    num_layers: int | None = option(None, rule=POSITIVE, doc="transformer layers" + FROM_SIZE)
    hidden_size: int | None = option(None, rule=POSITIVE, doc="hidden size" + FROM_SIZE)
    num_attention_heads: int | None = option(None, rule=POSITIVE,
                                             doc="attention heads" + FROM_SIZE)
    ffn_hidden_size: int | None = option(None, rule=POSITIVE,
                                         doc="MLP hidden size (default: the size's, or 4 x hidden)")
    seq_length: int | None = option(None, rule=POSITIVE, doc="sequence length" + FROM_SIZE)
    untie_embeddings: bool = option(False, flag="--untie-embeddings-and-output-weights",
                                    doc="a separate output layer instead of the embedding's")
    init_std: float = option(GPTConfig.init_std, flag="--init-method-std", rule=POSITIVE,
                             doc="standard deviation of the initial weights")
    peak_tflops: float | str | None = option(
        None, rule=POSITIVE, words=("auto", "measure", *device_peaks.PEAKS),
        doc="the device's peak dense 16-bit TFLOP/s for MFU: a number, or a device of "
            "caraml/device_peaks.py (e.g. A100, MI250-GCD): its datasheet peak; 'auto': the "
            "datasheet's by the device's name, measured where the device is not known; "
            "'measure': always measured")
    peak_seconds: float | None = option(
        None, rule=POSITIVE,
        doc="seconds each measurement of the matmul rate lasts, its windows together (one "
            "before training, one after; default: llm_training/matmul_rate.py's 1.5; the "
            "smoke tag's 0.3 checks the set-up)")


@dataclass(frozen=True, kw_only=True)
class LayoutOptions:
    """Parallel layout, micro-batch, precision and recomputation (defaults from the model size)."""

    tensor_parallel: int | None = option(None, flag="--tensor-model-parallel-size", rule=POSITIVE,
                                         doc="tensor-parallel size" + FROM_SIZE)
    pipeline_parallel: int | None = option(None, flag="--pipeline-model-parallel-size",
                                           rule=POSITIVE, doc="pipeline stages" + FROM_SIZE)
    sequence_parallel: bool | None = option(
        None, doc="as asked for; takes effect only with tensor parallelism" + FROM_SIZE)
    distributed_optimizer: bool | None = option(
        None, flag="--use-distributed-optimizer",
        doc="optimizer states sharded over data-parallel ranks" + FROM_SIZE)
    micro_batch_size: int | str | None = option(
        None, rule=POSITIVE, words=("auto",),
        doc="or 'auto': the largest that fits the device (llm_training/memory_plan.py)")
    precision: str | None = option(None, choices=PRECISIONS, doc="number format" + FROM_SIZE)
    recompute: str | None = option(
        None, flag="--recompute-activations", choices=(*RECOMPUTE_CHOICES, "auto"),
        doc="'auto': none where the model fits the device without, else full")
    gradient_accumulation: int = derived(1)
    auto_micro_batch: bool = derived(False)


@dataclass(frozen=True, kw_only=True)
class DataOptions:
    """Data: a preprocessed corpus, or synthetic tokens."""

    data_path: str | None = option(None, doc="prefix of the .bin/.idx pair")
    vocab_file: str | None = option(None, doc="GPT-2 BPE vocabulary (JSON)")
    merge_file: str | None = option(None, doc="GPT-2 BPE merges")
    split: str = option("949,50,1", doc="train, validation and test weights")
    synthetic: bool = option(False, doc="random token ids instead of a corpus")
    vocab_size: int | None = option(
        None, rule=POSITIVE, doc="synthetic vocabulary before padding (default: the size's)")


@dataclass(frozen=True, kw_only=True)
class OptimizerOptions:
    """Optimizer (upstream CARAML values)."""

    adam_beta1: float = option(0.9, doc="Adam beta1")
    adam_beta2: float = option(0.999, doc="Adam beta2")
    adam_eps: float = option(1e-8, rule=POSITIVE, doc="Adam epsilon")
    weight_decay: float = option(0.1, doc="decoupled weight decay")
    clip_grad: float = option(1.0, rule=POSITIVE, doc="gradient-norm clipping")
    initial_loss_scale: float = option(4096.0, rule=POSITIVE,
                                       doc="fp16 dynamic loss scale to start from")
    loss_scale_window: int = option(
        500, rule=POSITIVE, doc="fp16: iterations without overflow before the loss scale grows")


@dataclass(frozen=True, kw_only=True)
class Args(ModelOptions, LayoutOptions, DataOptions, OptimizerOptions, TrainingOptions,
           DriverOptions):
    """The LLM driver's options; after parse() the model size's defaults are filled in."""

    @property
    def adam_betas(self) -> tuple[float, float]:
        return self.adam_beta1, self.adam_beta2


def gpt_config(a: Args, vocab_size: int) -> GPTConfig:
    """The model to build, for a vocabulary of `vocab_size` tokens before padding."""
    return GPTConfig(
        num_layers=a.num_layers,
        hidden_size=a.hidden_size,
        num_attention_heads=a.num_attention_heads,
        ffn_hidden_size=a.ffn_hidden_size,
        seq_length=a.seq_length,
        vocab_size=padded_vocab_size(vocab_size, a.tensor_parallel),
        tie_embeddings=not a.untie_embeddings,
        init_std=a.init_std,
    )


# Options whose None means the model size's value (same names in ModelSize)
SIZE_DEFAULTS = ("num_layers", "hidden_size", "num_attention_heads", "seq_length",
                 "tensor_parallel", "pipeline_parallel", "sequence_parallel",
                 "distributed_optimizer", "global_batch_size", "precision", "recompute",
                 "gradient_accumulation")


def parse(argv: list[str] | None = None) -> Args:
    given = parse_options(Args, argv, prog=PROG,
                          description="GPT pretraining throughput benchmark (Megatron-like flags).")
    size = SIZES.get(given.model_size)
    if size is None:
        raise BenchmarkInputError(
            f"unknown model size {given.model_size!r}; choose one of {' '.join(SIZES)}")
    if given.vocab_size is not None and not given.synthetic:
        raise BenchmarkInputError(
            "--vocab-size is for --synthetic data; real data takes it from --vocab-file")
    filled = {name: getattr(size, name) for name in SIZE_DEFAULTS
              if name == "gradient_accumulation" or getattr(given, name) is None}
    hidden = filled.get("hidden_size", given.hidden_size)
    args = dataclasses.replace(
        given, **filled,
        ffn_hidden_size=given.ffn_hidden_size or size.ffn_hidden_size or 4 * hidden,
        micro_batch_size=(size.micro_batch_size if given.micro_batch_size in (None, "auto")
                          else given.micro_batch_size),
        auto_micro_batch=given.micro_batch_size == "auto",
        vocab_size=(given.vocab_size or size.synthetic_vocab_size) if given.synthetic else None)
    _check(args)
    return args


def _check(a: Args) -> None:
    """Checks that need no device count."""
    if a.hidden_size % a.num_attention_heads:
        raise BenchmarkInputError(
            f"hidden size {a.hidden_size} does not divide by "
            f"{a.num_attention_heads} attention heads")
    if (a.hidden_size // a.num_attention_heads) % 2:
        raise BenchmarkInputError(
            f"head dimension {a.hidden_size // a.num_attention_heads} is odd; "
            "rotary embeddings need an even one")
    a.check_run()
    a.check_energy()
    a.check_compile()
    if a.synthetic == (a.data_path is not None):
        raise BenchmarkInputError(
            "give either --data-path (with --vocab-file and --merge-file) or --synthetic")
    if a.data_path is not None and not (a.vocab_file and a.merge_file):
        raise BenchmarkInputError("--data-path needs --vocab-file and --merge-file")
    if a.auto_micro_batch and not a.global_batch_size:
        raise BenchmarkInputError("--micro-batch-size auto needs a fixed global batch: pass "
                                  "--global-batch-size (this size's grows with the micro-batch)")
    if a.compile and a.backend != "torch":
        raise BenchmarkInputError("--compile is for --backend torch (megatron-core fuses its own kernels)")
    if a.backend == "torch" and (a.tensor_parallel > 1 or a.pipeline_parallel > 1):
        raise BenchmarkInputError(
            f"the torch backend has data parallelism only but tensor x pipeline parallel "
            f"size is {a.tensor_parallel} x {a.pipeline_parallel}; use --backend megatron "
            "or --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1")
    if a.num_layers % a.pipeline_parallel:
        raise BenchmarkInputError(
            f"{a.num_layers} layers do not split evenly over {a.pipeline_parallel} pipeline stages")
    if a.num_attention_heads % a.tensor_parallel or a.ffn_hidden_size % a.tensor_parallel:
        raise BenchmarkInputError(
            f"{a.num_attention_heads} attention heads and FFN size {a.ffn_hidden_size} must "
            f"divide by tensor-parallel size {a.tensor_parallel}")


@dataclass(frozen=True)
class Layout:
    """How the devices and the global batch are split."""

    devices: int
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    micro_batch_size: int
    global_batch_size: int
    sequence_parallel: bool  # in effect: asked for, and tensor parallelism > 1

    def __post_init__(self) -> None:
        if self.global_batch_size % (self.micro_batch_size * self.data_parallel):
            raise BenchmarkInputError(
                f"global batch size {self.global_batch_size} is not divisible by micro-batch size "
                f"{self.micro_batch_size} x data-parallel size {self.data_parallel}")

    @property
    def microbatches(self) -> int:
        """Micro-batches per iteration on one data-parallel rank (gradient accumulation)."""
        return self.global_batch_size // (self.micro_batch_size * self.data_parallel)


def resolve_layout(a: Args, world_size: int) -> Layout:
    model_parallel = a.tensor_parallel * a.pipeline_parallel
    if world_size % model_parallel:
        raise BenchmarkInputError(
            f"tensor x pipeline parallel size {a.tensor_parallel} x {a.pipeline_parallel} = "
            f"{model_parallel} does not divide the {world_size} devices")
    dp = world_size // model_parallel
    global_batch = a.global_batch_size or a.micro_batch_size * dp * a.gradient_accumulation
    return Layout(
        devices=world_size,
        tensor_parallel=a.tensor_parallel,
        pipeline_parallel=a.pipeline_parallel,
        data_parallel=dp,
        micro_batch_size=a.micro_batch_size,
        global_batch_size=global_batch,
        sequence_parallel=a.sequence_parallel and a.tensor_parallel > 1,
    )
