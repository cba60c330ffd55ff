"""The driver's command line, and the checks that turn bad input into one
line before any training starts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from caraml.node.options import (
    POSITIVE,
    PRECISIONS,
    DriverOptions,
    TrainingOptions,
    default,
    option,
)
from caraml.node.options import parse as parse_options
from caraml.report import BenchmarkInputError
from image_classification import model

SYNTHETIC = "synthetic"


@dataclass(frozen=True, kw_only=True)
class Options(TrainingOptions, DriverOptions):
    """Model, data and number format."""

    model: str = option("resnet50", doc="torchvision classification model (see --list-models)")
    list_models: bool = option(False, doc="print the valid --model names and exit")
    data: str = option(SYNTHETIC, doc="'synthetic' (random batches made on the host) or an "
                                      "ImageFolder directory (one sub-directory per class)")
    precision: str = option("fp32", choices=PRECISIONS, doc="number format")
    channels_last: bool = option(False, doc="NHWC memory format for the images and the model")
    image_size: int = option(224, rule=POSITIVE, doc="image height and width in pixels")
    num_classes: int = option(1000, rule=POSITIVE, doc="classes of the classifier")
    # this benchmark's own defaults for shared options
    train_iters: int = default(100)
    warmup_iters: int = default(10)
    seed: int = default(1234)
    global_batch_size: int | None = default(256)
    num_workers: int = default(4)
    lr: float = default(0.1)
    energy_dir: str | None = default("energy")


def parse(argv: Sequence[str] | None = None) -> Options:
    return parse_options(
        Options, argv, prog="python -m image_classification.image_classification_torch",
        description="Trains a torchvision classification model from scratch and reports "
                    "images/s (and, through jpwr, energy) per rank and in total.")


def check_input(args: Options) -> None:
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
    args.check_run()
    args.check_energy()
    args.check_compile()
