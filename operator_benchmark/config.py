"""The operator driver's command line, and the checks that turn bad input
into one line before any training starts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from caraml.node.options import (
    NON_NEGATIVE,
    POSITIVE,
    PRECISIONS,
    DriverOptions,
    default,
    option,
)
from caraml.node.options import parse as parse_options
from caraml.report import BenchmarkInputError
from operator_benchmark import problems

DATA = (problems.SYNTHETIC, problems.GENERATED)
# fp16 needs a gradient scaler, and torch's cannot unscale complex gradients
# (its unscale kernel takes real floating types only, on CPUs and GPUs):
# the FNO's spectral weights are complex. bf16 has fp32's range and needs none.
FP16_REFUSED = ("precision fp16 needs a gradient scaler and torch's cannot unscale the FNO's "
                "complex spectral weights; use bf16 (no scaler needed) or fp32")
# torch.compile's modes; none trains eagerly
COMPILE_MODES = ("none", "default", "max-autotune")
# The size of an epoch for synthetic data, which has none of its own
SYNTHETIC_EPOCH = 1024


@dataclass(frozen=True, kw_only=True)
class Options(DriverOptions):
    """Problem, data, batch, number format and compilation."""

    problem: str = option("rbc2d", doc="problem (fields, grid and FNO): see "
                                       "--list-problems")
    list_problems: bool = option(False, doc="print the valid --problem names and exit")
    data: str | None = option(None, choices=DATA,
                              doc="synthetic random fields (throughput), or generated: the "
                                  "suite's Navier-Stokes data (navier_stokes2d only); default: "
                                  "the problem's own")
    global_batch_size: int = option(4, rule=POSITIVE, doc="samples per iteration over all devices")
    precision: str = option("fp32", choices=PRECISIONS,
                            doc="number format (fp16 is refused: see docs/operator_benchmark.md); "
                                "under bf16 the Fourier layers' FFTs stay fp32")
    compile: str = option("none", choices=COMPILE_MODES,
                          doc="torch.compile mode (compiled in the warm-up), or none: eager")
    samples_per_epoch: int | None = option(
        None, rule=POSITIVE, doc=f"samples an epoch stands for in epoch_s (default: the "
                                 f"generated data's size; {SYNTHETIC_EPOCH} for synthetic data)")
    generated_samples: int = option(256, rule=POSITIVE,
                                    doc="samples of Navier-Stokes data to generate (or read "
                                        "from the cache)")
    lr: float = option(1e-3, rule=POSITIVE, doc="Adam's learning rate")
    weight_decay: float = option(1e-4, rule=NON_NEGATIVE, doc="Adam's weight decay")
    # this benchmark's own defaults for shared options
    train_iters: int = default(50)
    warmup_iters: int = default(5)
    energy_dir: str | None = default("energy")

    @property
    def data_kind(self) -> str:
        return self.data or problems.get(self.problem).data

    @property
    def epoch_samples(self) -> int:
        if self.samples_per_epoch is not None:
            return self.samples_per_epoch
        return self.generated_samples if self.data_kind == problems.GENERATED else SYNTHETIC_EPOCH


def parse(argv: Sequence[str] | None = None) -> Options:
    return parse_options(
        Options, argv, prog="python -m operator_benchmark.fno_training",
        description="Trains neuraloperator's Fourier Neural Operator on a problem's fields and "
                    "reports samples/s (and, through jpwr, energy) per rank and in total.")


def check_input(args: Options) -> None:
    """Checks that need neither the process group nor the device."""
    try:
        problem = problems.get(args.problem)
    except KeyError as e:
        raise BenchmarkInputError(e.args[0]) from None
    if args.data_kind == problems.GENERATED and problem.data != problems.GENERATED:
        generated = " ".join(n for n, p in problems.PROBLEMS.items() if p.data == problems.GENERATED)
        raise BenchmarkInputError(
            f"--data generated: the suite generates data only for {generated}; "
            f"{args.problem} trains on --data synthetic")
    if args.precision == "fp16":
        raise BenchmarkInputError(FP16_REFUSED)
    args.check_run()
    args.check_energy()
    if args.compile != "none" and args.warmup_iters == 0:
        raise BenchmarkInputError(
            f"--compile {args.compile} needs --warmup-iters 1 or more: the model is compiled in "
            "the first iteration, which must not be timed")
