"""The driver's command line, and the checks that turn bad input into one
line before any training starts."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import torch

from caraml import precision, report
from caraml.report import BenchmarkInputError
from image_classification import model

SYNTHETIC = "synthetic"
NO_ENERGY = "none"


class _Parser(argparse.ArgumentParser):
    # argparse would print the usage and a second line; JUBE's error pattern
    # and the result table want the problem in one CARAML ERROR line.
    def error(self, message: str):
        report.error(message)
        self.exit(2)


def _bounded(convert, accept, what: str):
    """An argparse type that names the rule a bad value breaks."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value
    return parse


_positive_int = _bounded(int, lambda v: v > 0, "a positive integer")
_non_negative_int = _bounded(int, lambda v: v >= 0, "an integer of 0 or more")
_positive_float = _bounded(float, lambda v: v > 0, "a positive number")


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m image_classification.image_classification_torch",
        description="Trains a torchvision classification model from scratch and "
                    "reports images/s (and, through jpwr, energy) per rank and in total.",
    )
    p.add_argument("--model", default="resnet50",
                   help="torchvision classification model (see --list-models)")
    p.add_argument("--list-models", action="store_true",
                   help="print the valid --model names and exit")
    p.add_argument("--data", default=SYNTHETIC,
                   help="'synthetic' (random batches made on the host) or an "
                        "ImageFolder directory (one sub-directory per class)")
    p.add_argument("--global-batch-size", type=_positive_int, default=256,
                   help="images per iteration over all devices")
    p.add_argument("--precision", choices=precision.NAMES, default="fp32")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--iterations", type=_positive_int, default=100,
                   help="iterations in total, warm-up included")
    p.add_argument("--warmup-iterations", type=_non_negative_int, default=10,
                   help="first iterations left out of the timing")
    p.add_argument("--exit-duration-in-mins", type=_positive_float, default=None,
                   help="stop after this wall-clock time, counted from start-up")
    p.add_argument("--log-interval", type=_positive_int, default=10,
                   help="iterations between progress lines")
    p.add_argument("--image-size", type=_positive_int, default=224)
    p.add_argument("--num-classes", type=_positive_int, default=1000)
    p.add_argument("--lr", type=_positive_float, default=0.1)
    p.add_argument("--num-workers", type=_non_negative_int, default=4,
                   help="DataLoader worker processes per rank (ImageFolder data only)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--energy-dir", default="energy",
                   help="folder for the per-rank jpwr files")
    p.add_argument("--energy-methods", nargs="+", default=["auto"],
                   help=f"jpwr methods, or '{NO_ENERGY}' to measure no energy")
    p.add_argument("--energy-interval-ms", type=_positive_int, default=100)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    return p


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return parser().parse_args(argv)


def measures_energy(args: argparse.Namespace) -> bool:
    return args.energy_methods != [NO_ENERGY]


def check_input(args: argparse.Namespace) -> None:
    """Checks that need neither the process group nor the device."""
    if args.model not in model.names():
        raise BenchmarkInputError(
            f"unknown model {args.model!r}: torchvision has no classification model "
            f"of that name; run with --list-models to see the valid names")
    if args.data != SYNTHETIC:
        path = Path(args.data)
        if not path.exists():
            raise BenchmarkInputError(f"data path {args.data} does not exist")
        if not path.is_dir():
            raise BenchmarkInputError(
                f"data path {args.data} is not a directory (ImageFolder wants one "
                f"sub-directory per class)")
    if args.warmup_iterations >= args.iterations:
        raise BenchmarkInputError(
            f"--warmup-iterations {args.warmup_iterations} leaves no timed iteration "
            f"of --iterations {args.iterations} (the count includes the warm-up)")
    if args.compile and args.warmup_iterations == 0:
        raise BenchmarkInputError(
            "--compile needs --warmup-iterations 1 or more: the model is compiled in the "
            "first iteration, which must not be timed")
    if NO_ENERGY in args.energy_methods and measures_energy(args):
        raise BenchmarkInputError(
            f"--energy-methods {' '.join(args.energy_methods)}: "
            f"'{NO_ENERGY}' cannot be combined with other methods")


def check_placement(args: argparse.Namespace, world_size: int, device: torch.device) -> None:
    """Checks that depend on how many devices there are and of which kind."""
    if args.global_batch_size % world_size:
        raise BenchmarkInputError(
            f"global batch size {args.global_batch_size} does not divide by "
            f"{world_size} devices")
    precision.check(args.precision, device)
