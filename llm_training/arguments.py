"""The driver's command line and the checks of what it asks for. Pure
Python (no torch), so a login node or a pre-flight check can validate a
configuration without a framework installed:

    from llm_training.arguments import parse, resolve_layout
    layout = resolve_layout(parse(argv), world_size=8)  # raises BenchmarkInputError
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from caraml.report import BenchmarkInputError
from llm_training.model_sizes import (
    PRECISIONS,
    RECOMPUTE_CHOICES,
    SIZES,
    GPTConfig,
    padded_vocab_size,
)

BACKENDS = ("torch", "megatron")


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage, so every bad flag
    ends in the one-line `CARAML ERROR:` format."""

    def error(self, message: str):
        raise BenchmarkInputError(message)


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {text})")
    return value


def _micro_batch(text: str) -> int | str:
    return text if text == "auto" else _positive_int(text)


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive (got {text})")
    return value


def _peak(text: str) -> float | str:
    return text if text in ("measure", "auto") else _positive_float(text)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m llm_training.pretrain_gpt",
                description="GPT pretraining throughput benchmark (Megatron-like flags).",
                # @file: more flags, one per line (JUBE's data step writes one)
                fromfile_prefix_chars="@")
    p.add_argument("--backend", choices=BACKENDS, default="torch")
    p.add_argument("--model-size", required=True, help=f"one of {', '.join(SIZES)}")

    shape = p.add_argument_group("model shape (overrides the model size's)")
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size",
                 "--seq-length"):
        shape.add_argument(flag, type=_positive_int)
    shape.add_argument("--untie-embeddings-and-output-weights", action="store_true")

    layout = p.add_argument_group("parallel layout and batch (defaults from the model size)")
    layout.add_argument("--tensor-model-parallel-size", type=_positive_int)
    layout.add_argument("--pipeline-model-parallel-size", type=_positive_int)
    layout.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction)
    layout.add_argument("--use-distributed-optimizer", action=argparse.BooleanOptionalAction)
    layout.add_argument("--micro-batch-size", type=_micro_batch,
                        help="or 'auto': the largest that fits the device (llm_training/memory_plan.py)")
    layout.add_argument("--global-batch-size", type=_positive_int)
    layout.add_argument("--precision", choices=PRECISIONS)
    layout.add_argument("--recompute-activations", choices=(*RECOMPUTE_CHOICES, "auto"),
                        help="'auto': none where the model fits the device without, else full")
    layout.add_argument("--compile", action="store_true",
                        help="torch backend: torch.compile the model (the first iterations compile)")

    run = p.add_argument_group("run length and logging")
    run.add_argument("--train-iters", type=_positive_int, required=True,
                     help="iterations in all, warm-up included")
    run.add_argument("--exit-duration-in-mins", type=_positive_float,
                     help="wall-clock budget from the driver's start")
    run.add_argument("--warmup-iters", type=int, default=1,
                     help="first iterations left out of the timing")
    run.add_argument("--log-interval", type=_positive_int, default=10)

    data = p.add_argument_group("data: a preprocessed corpus, or synthetic tokens")
    data.add_argument("--data-path", help="prefix of the .bin/.idx pair")
    data.add_argument("--vocab-file")
    data.add_argument("--merge-file")
    data.add_argument("--split", default="949,50,1")
    data.add_argument("--synthetic", action="store_true")
    data.add_argument("--vocab-size", type=_positive_int,
                      help="synthetic vocabulary before padding (default: the model size's)")
    data.add_argument("--num-workers", type=int, default=2, help="data loader processes")

    optim = p.add_argument_group("optimizer and initialisation (upstream CARAML values)")
    optim.add_argument("--lr", type=_positive_float, default=1e-4)
    optim.add_argument("--adam-beta1", type=float, default=0.9)
    optim.add_argument("--adam-beta2", type=float, default=0.999)
    optim.add_argument("--adam-eps", type=_positive_float, default=1e-8)
    optim.add_argument("--weight-decay", type=float, default=0.1)
    optim.add_argument("--clip-grad", type=_positive_float, default=1.0)
    optim.add_argument("--init-method-std", type=_positive_float, default=GPTConfig.init_std)
    optim.add_argument("--seed", type=int, default=42)
    optim.add_argument("--initial-loss-scale", type=_positive_float, default=4096.0,
                       help="fp16 dynamic loss scale to start from")
    optim.add_argument("--loss-scale-window", type=_positive_int, default=500,
                       help="fp16: iterations without overflow before the loss scale grows")

    energy = p.add_argument_group("energy (jpwr) and efficiency")
    energy.add_argument("--energy-dir", help="folder for the per-rank energy files")
    energy.add_argument("--energy-methods", nargs="+", default=["auto"],
                        help="jpwr methods, or 'none' to measure no energy")
    energy.add_argument("--energy-interval-ms", type=_positive_int, default=100)
    energy.add_argument("--peak-tflops", type=_peak,
                        help="the device's peak dense 16-bit TFLOP/s for MFU; 'auto': the "
                             "datasheet's by device name (caraml/device_peaks.py), measured where "
                             "the device is not known; 'measure': always measured")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    return p


@dataclass(frozen=True)
class Args:
    """The command line with the model size's defaults filled in."""

    backend: str
    model_size: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    ffn_hidden_size: int
    seq_length: int
    untie_embeddings: bool
    tensor_parallel: int
    pipeline_parallel: int
    sequence_parallel: bool  # as asked for; only takes effect with tensor parallelism
    distributed_optimizer: bool
    micro_batch_size: int
    global_batch_size: int | None  # None: from the size's gradient accumulation
    gradient_accumulation: int
    precision: str
    recompute: str
    train_iters: int
    exit_duration_mins: float | None
    warmup_iters: int
    log_interval: int
    data_path: str | None
    vocab_file: str | None
    merge_file: str | None
    split: str
    synthetic: bool
    vocab_size: int | None  # before padding; None: from the tokenizer files
    num_workers: int
    lr: float
    adam_betas: tuple[float, float]
    adam_eps: float
    weight_decay: float
    clip_grad: float
    init_std: float
    seed: int
    initial_loss_scale: float
    loss_scale_window: int
    energy_dir: str | None
    energy_methods: tuple[str, ...]  # empty: no energy measurement
    energy_interval_ms: int
    peak_tflops: float | str | None
    device: str
    compile: bool = False
    auto_micro_batch: bool = False  # micro_batch_size is the size's, until memory_plan chooses


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


def parse(argv: list[str] | None = None) -> Args:
    ns = build_parser().parse_args(argv)
    size = SIZES.get(ns.model_size)
    if size is None:
        raise BenchmarkInputError(
            f"unknown model size {ns.model_size!r}; choose one of {' '.join(SIZES)}")

    def pick(value, default):
        return default if value is None else value

    hidden = pick(ns.hidden_size, size.hidden_size)
    energy_methods = tuple(m for m in ns.energy_methods if m != "none")
    if energy_methods and len(energy_methods) != len(ns.energy_methods):
        raise BenchmarkInputError("--energy-methods none cannot be combined with other methods")
    args = Args(
        backend=ns.backend,
        model_size=ns.model_size,
        num_layers=pick(ns.num_layers, size.num_layers),
        hidden_size=hidden,
        num_attention_heads=pick(ns.num_attention_heads, size.num_attention_heads),
        ffn_hidden_size=pick(ns.ffn_hidden_size, size.ffn_hidden_size or 4 * hidden),
        seq_length=pick(ns.seq_length, size.seq_length),
        untie_embeddings=ns.untie_embeddings_and_output_weights,
        tensor_parallel=pick(ns.tensor_model_parallel_size, size.tensor_parallel),
        pipeline_parallel=pick(ns.pipeline_model_parallel_size, size.pipeline_parallel),
        sequence_parallel=pick(ns.sequence_parallel, size.sequence_parallel),
        distributed_optimizer=pick(ns.use_distributed_optimizer, size.distributed_optimizer),
        micro_batch_size=(size.micro_batch_size if ns.micro_batch_size in (None, "auto")
                          else ns.micro_batch_size),
        auto_micro_batch=ns.micro_batch_size == "auto",
        global_batch_size=pick(ns.global_batch_size, size.global_batch_size),
        gradient_accumulation=size.gradient_accumulation,
        precision=pick(ns.precision, size.precision),
        recompute=pick(ns.recompute_activations, size.recompute),
        train_iters=ns.train_iters,
        exit_duration_mins=ns.exit_duration_in_mins,
        warmup_iters=ns.warmup_iters,
        log_interval=ns.log_interval,
        data_path=ns.data_path,
        vocab_file=ns.vocab_file,
        merge_file=ns.merge_file,
        split=ns.split,
        synthetic=ns.synthetic,
        vocab_size=pick(ns.vocab_size, size.synthetic_vocab_size) if ns.synthetic else None,
        compile=ns.compile,
        num_workers=ns.num_workers,
        lr=ns.lr,
        adam_betas=(ns.adam_beta1, ns.adam_beta2),
        adam_eps=ns.adam_eps,
        weight_decay=ns.weight_decay,
        clip_grad=ns.clip_grad,
        init_std=ns.init_method_std,
        seed=ns.seed,
        initial_loss_scale=ns.initial_loss_scale,
        loss_scale_window=ns.loss_scale_window,
        energy_dir=ns.energy_dir,
        energy_methods=energy_methods,
        energy_interval_ms=ns.energy_interval_ms,
        peak_tflops=ns.peak_tflops,
        device=ns.device,
    )
    _check(args, ns)
    return args


def _check(a: Args, ns: argparse.Namespace) -> None:
    """Checks that need no device count."""
    if a.hidden_size % a.num_attention_heads:
        raise BenchmarkInputError(
            f"hidden size {a.hidden_size} does not divide by "
            f"{a.num_attention_heads} attention heads")
    if (a.hidden_size // a.num_attention_heads) % 2:
        raise BenchmarkInputError(
            f"head dimension {a.hidden_size // a.num_attention_heads} is odd; "
            "rotary embeddings need an even one")
    if a.warmup_iters < 0:
        raise BenchmarkInputError(f"--warmup-iters must be >= 0 (got {a.warmup_iters})")
    if a.train_iters <= a.warmup_iters:
        raise BenchmarkInputError(
            f"--train-iters {a.train_iters} leaves no timed iteration after "
            f"{a.warmup_iters} warm-up iterations")
    if a.num_workers < 0:
        raise BenchmarkInputError(f"--num-workers must be >= 0 (got {a.num_workers})")
    if a.synthetic == (a.data_path is not None):
        raise BenchmarkInputError(
            "give either --data-path (with --vocab-file and --merge-file) or --synthetic")
    if a.data_path is not None and not (a.vocab_file and a.merge_file):
        raise BenchmarkInputError("--data-path needs --vocab-file and --merge-file")
    if ns.vocab_size is not None and not a.synthetic:
        raise BenchmarkInputError(
            "--vocab-size is for --synthetic data; real data takes it from --vocab-file")
    if a.energy_methods and not a.energy_dir:
        raise BenchmarkInputError(
            "--energy-dir is needed to measure energy (or pass --energy-methods none)")
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
    if global_batch % (a.micro_batch_size * dp):
        raise BenchmarkInputError(
            f"global batch size {global_batch} is not divisible by micro-batch size "
            f"{a.micro_batch_size} x data-parallel size {dp}")
    return Layout(
        devices=world_size,
        tensor_parallel=a.tensor_parallel,
        pipeline_parallel=a.pipeline_parallel,
        data_parallel=dp,
        micro_batch_size=a.micro_batch_size,
        global_batch_size=global_batch,
        sequence_parallel=a.sequence_parallel and a.tensor_parallel > 1,
    )
