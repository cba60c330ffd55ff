"""Command-line options, each declared once: a field of a frozen dataclass
with its default, type, choices, rule and a one-line doc. The parser is
generated from the fields, so a flag, its value in the program and its
help text cannot drift apart. Both drivers build their options from the
groups here (run length, energy) plus their own groups:

    @dataclass(frozen=True, kw_only=True)
    class Options(DriverOptions):
        model: str = option("resnet50", doc="torchvision classification model")

    opts = parse(Options, argv, prog="...")  # BenchmarkInputError on bad input

A driver whose default differs from the shared one redeclares only the
default (`warmup_iters: int = default(10)`); type, rule and doc stay those
of the one declaration. Standard library only: login-node checks parse a
driver's options without torch."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import MISSING, dataclass

from caraml import power_limit, report
from caraml.power_limit import MODES as POWER_LIMIT_MODES
from caraml.report import BenchmarkInputError
from jpwr.gpu.power_limit import SCOPES as POWER_LIMIT_SCOPES

if typing.TYPE_CHECKING:
    from _typeshed import DataclassInstance
T = typing.TypeVar("T", bound="DataclassInstance")

# seconds every rank has to come to the process group, unless a driver is told otherwise
STARTUP_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Rule:
    """A condition a number must meet, named in the error when it does not."""

    text: str  # with {noun} ("integer") or {a_noun} ("an integer")
    holds: Callable[[float], bool]


POSITIVE = Rule("a positive {noun}", lambda v: v > 0)
NON_NEGATIVE = Rule("{a_noun} of 0 or more", lambda v: v >= 0)


def option(default: object = MISSING, *, doc: str, flag: str | None = None,
           choices: Sequence[str] | None = None, rule: Rule | None = None,
           words: Sequence[str] = (), required: bool = False) -> typing.Any:
    """A command-line option. `flag` defaults to the field's name with
    dashes; `words` are values accepted beside a number (e.g. "auto")."""
    meta = {"doc": doc, "flag": flag, "choices": tuple(choices) if choices else None,
            "rule": rule, "words": tuple(words), "required": required}
    if required:
        return dataclasses.field(default=None, metadata=meta)
    if isinstance(default, (list, dict, set)):
        raise TypeError("use a tuple for a sequence default")
    return dataclasses.field(default=default, metadata=meta)


def default(value: object) -> typing.Any:
    """Another default for an option a shared group declares."""
    return dataclasses.field(default=value, metadata={"inherit": True})


def derived(value: object) -> typing.Any:
    """A field that is no flag: set when the options are resolved."""
    return dataclasses.field(default=value, metadata={"derived": True})


def _declaration(cls: type, name: str) -> dict:
    for klass in cls.__mro__:
        found = getattr(klass, "__dataclass_fields__", {}).get(name)
        if found is not None and not found.metadata.get("inherit"):
            return dict(found.metadata)
    raise TypeError(f"{cls.__name__}.{name}: default() of an option no base class declares")


def _unwrap(hint: object) -> tuple[object, bool]:
    """(the type without None, whether None is allowed)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return (args[0] if len(args) == 1 else tuple(args)), type(None) in typing.get_args(hint)
    return hint, False


def _converter(kind: object, rule: Rule | None, words: tuple[str, ...]) -> Callable[[str], object]:
    number = next((t for t in (kind if isinstance(kind, tuple) else (kind,)) if t in (int, float)),
                  None)

    def convert(text: str) -> object:
        if text in words:
            return text
        if number is None:
            return text
        try:
            value = number(text)
        except ValueError:
            value = None
        if value is None or (rule is not None and not rule.holds(value)):
            noun = {int: "integer", float: "number"}[number]
            what = (rule.text if rule else "{a_noun}").format(
                noun=noun, a_noun=("an " if noun[0] == "i" else "a ") + noun)
            what += "".join(f" or {word}" for word in words)
            raise argparse.ArgumentTypeError(f"must be {what} (got {text})")
        return value

    return convert


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing the usage, so every bad flag
    ends in the one-line `CARAML ERROR:` of the driver."""

    def error(self, message: str) -> typing.NoReturn:
        raise BenchmarkInputError(message)


def _groups(cls: type) -> Iterable[tuple[type, list[dataclasses.Field]]]:
    """Each class's own options (not a default() it gives another), the
    driver's class first, the shared groups after."""
    for klass in cls.__mro__:
        own = klass.__dict__.get("__annotations__", {})
        declared = getattr(klass, "__dataclass_fields__", {})
        fields = [f for f in dataclasses.fields(cls) if f.name in own
                  and not declared[f.name].metadata.get("inherit")]
        if fields:
            yield klass, fields


def parser(cls: type, *, prog: str, description: str) -> argparse.ArgumentParser:
    hints = typing.get_type_hints(cls)
    p = _Parser(prog=prog, description=description,
                # @file: more flags, one per line (JUBE's data step writes one)
                fromfile_prefix_chars="@")
    for klass, fields in _groups(cls):
        doc = (klass.__doc__ or klass.__name__).strip().splitlines()[0]
        group = p.add_argument_group(doc.rstrip("."))
        for f in fields:
            meta = _declaration(cls, f.name)
            if meta.get("derived"):
                continue
            flag = meta["flag"] or "--" + f.name.replace("_", "-")
            kind, optional = _unwrap(hints[f.name])
            kw: dict = {"dest": f.name, "help": meta["doc"], "default": f.default}
            if kind is bool:
                kw["action"] = argparse.BooleanOptionalAction if optional else "store_true"
            elif typing.get_origin(kind) is tuple:
                kw |= {"nargs": "+", "type": _converter(typing.get_args(kind)[0], meta["rule"], ())}
            else:
                kw["type"] = _converter(kind, meta["rule"], meta["words"])
                kw["choices"] = meta["choices"]
            if meta["required"] and f.default is None:
                kw["required"] = True
            group.add_argument(flag, **kw)
    return p


def parse(cls: type[T], argv: Sequence[str] | None, *, prog: str, description: str = "") -> T:
    ns = parser(cls, prog=prog, description=description).parse_args(argv)
    values = {f.name: getattr(ns, f.name) for f in dataclasses.fields(cls)
              if not _declaration(cls, f.name).get("derived")}
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


DEVICES = ("auto", "cpu", "cuda")
# What each means on a device (autocast, scaler, TF32) is in caraml/node/precision.py.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
# Graphcore's notation (GC200's trainers): compute.master, the type of the
# arithmetic and of the weights the optimizer keeps. The suite's fp16 is
# fp16 arithmetic on fp32 master weights (autocast, Megatron's --fp16), so
# Graphcore's 16.32; 16.16 keeps fp16 weights too and has no counterpart
# here: a row of it is like for like with no GPU's.
GRAPHCORE_PRECISIONS = {"fp16": "16.32", "fp32": "32.32"}
GRAPHCORE_ONLY = ("16.16",)


def graphcore_precision(name: str) -> str:
    """A precision as Graphcore's trainers take it: a suite's name mapped,
    a Graphcore-only one as it is; BenchmarkInputError for any other."""
    if name in GRAPHCORE_ONLY:
        return name
    if name not in GRAPHCORE_PRECISIONS:
        raise BenchmarkInputError(
            f"precision {name} has no Graphcore counterpart on GC200: one of "
            f"{', '.join([*GRAPHCORE_PRECISIONS, *GRAPHCORE_ONLY])}")
    return GRAPHCORE_PRECISIONS[name]
NO_ENERGY = "none"
NO_ENERGY_DIR = "--energy-dir is needed to measure energy (or pass --energy-methods none)"


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """Run length, device and logging."""

    train_iters: int = option(required=True, rule=POSITIVE,
                              doc="iterations in all, warm-up included")
    warmup_iters: int = option(1, rule=NON_NEGATIVE,
                               doc="first iterations left out of the timing")
    exit_duration_in_mins: float | None = option(
        None, rule=POSITIVE, doc="wall-clock budget, counted from the driver's start")
    min_timed_iterations: int | None = option(
        None, rule=POSITIVE, doc="a measurement window: go on past --train-iters until this many iterations "
                                 "are timed")
    min_timed_seconds: float | None = option(
        None, rule=POSITIVE, doc="a measurement window: go on past --train-iters until the timed iterations "
                                 "have lasted this long")
    log_interval: int = option(10, rule=POSITIVE, doc="iterations between progress lines")
    seed: int = option(42, doc="random seed (each rank adds its rank where data differ)")
    device: str = option("auto", choices=DEVICES,
                         doc="cuda: fail unless a GPU is there; auto: a GPU where there is one")
    startup_timeout_s: float = option(
        STARTUP_TIMEOUT_S, rule=POSITIVE,
        doc="seconds every rank has to come to the process group and its first collective "
            "(at most the wall-clock budget); then each rank that came stops, naming the others")

    @property
    def planned(self) -> str:
        """The planned iterations as a progress line says them: `24+` where a
        measurement window may run past them."""
        windowed = self.min_timed_iterations is not None or self.min_timed_seconds is not None
        return f"{self.train_iters}{'+' if windowed else ''}"

    @property
    def budget_s(self) -> float | None:
        return None if self.exit_duration_in_mins is None else self.exit_duration_in_mins * 60

    @property
    def startup_deadline_s(self) -> float:
        """A run that must end within its budget does not wait longer than
        the budget for its ranks either."""
        return min(self.startup_timeout_s, self.budget_s or self.startup_timeout_s)

    def check_run(self) -> None:
        if self.train_iters <= self.warmup_iters:
            raise BenchmarkInputError(
                f"--train-iters {self.train_iters} leaves no timed iteration after "
                f"{self.warmup_iters} warm-up iterations (the count includes the warm-up)")


@dataclass(frozen=True, kw_only=True)
class EnergyOptions:
    """Energy measurement (jpwr)."""

    energy_dir: str | None = option(None, doc="folder for the per-rank energy files")
    energy_methods: tuple[str, ...] = option(
        ("auto",), doc=f"jpwr methods, or '{NO_ENERGY}' to measure no energy")
    energy_interval_ms: int = option(100, rule=POSITIVE, doc="power sampling interval")
    # a point of the power-limit sweep (caraml/power_limit.py)
    power_limit: str | None = option(
        None, doc="power limit per device for the run, put back at its end: 'default' (set "
                  "nothing, report it), watts, or a fraction (up to 1) of --tdp-w")
    tdp_w: float | None = option(None, rule=POSITIVE,
                                 doc="the system's TDP per device (a fractional --power-limit)")
    power_limit_range_w: str | None = option(
        None, doc="the limits the system allows, LOW:HIGH in W (either end may be empty)")
    power_limit_scope: str = option(
        POWER_LIMIT_SCOPES[0], choices=POWER_LIMIT_SCOPES,
        doc="what --power-limit limits: 'gpu' (the GPU's own limit), 'module' (a GH200 "
            "superchip's, through NVML's power scopes) or 'package' (an MI250 card's, set once "
            "for its --devices-per-package devices)")
    power_limit_mode: str = option(
        POWER_LIMIT_MODES[0], choices=POWER_LIMIT_MODES,
        doc="who sets --power-limit: 'suite' (each rank, which needs the privilege to) or "
            "'external' (the centre before the job; each rank checks and records it)")
    devices_per_package: int = option(
        1, rule=POSITIVE, doc="devices of one package (a package's --power-limit is its devices' "
                              "together, a fraction of --tdp-w times this)")

    @property
    def measures_energy(self) -> bool:
        return self.energy_methods != (NO_ENERGY,)

    def check_energy(self) -> None:
        if NO_ENERGY in self.energy_methods and self.measures_energy:
            raise BenchmarkInputError(
                f"--energy-methods {' '.join(self.energy_methods)}: '{NO_ENERGY}' cannot be "
                "combined with other methods")
        if self.measures_energy and not self.energy_dir:
            raise BenchmarkInputError(NO_ENERGY_DIR)
        if self.power_limit is not None:
            try:
                power_limit.asked_w(self.power_limit, power_limit.point_tdp_w(
                    self.tdp_w, self.power_limit_scope, self.devices_per_package))
                power_limit.parse_range(self.power_limit_range_w)
            except BenchmarkInputError as e:
                raise BenchmarkInputError(f"--power-limit: {e}") from None


@dataclass(frozen=True, kw_only=True)
class DriverOptions(RunOptions, EnergyOptions):
    """A driver's options as the driver core (caraml/node/driver.py) reads
    them: the run and its energy. Every driver's options derive from it and
    add groups of their own."""


@dataclass(frozen=True, kw_only=True)
class TrainingOptions:
    """Batch, compilation, data loading and learning rate."""

    global_batch_size: int | None = option(None, rule=POSITIVE,
                                           doc="samples per iteration over all devices")
    compile: bool = option(False, doc="torch.compile the model (compiled in the warm-up)")
    num_workers: int | str = option(
        "auto", rule=NON_NEGATIVE, words=("auto",),
        doc="data loader processes per rank, or 'auto': none on a CPU device, else the rank's "
            "cores less one, at most 2 (caraml/node/loader_workers.py)")
    lr: float = option(1e-4, rule=POSITIVE, doc="learning rate")

    def check_compile(self: typing.Any) -> None:
        if self.compile and self.warmup_iters == 0:
            raise BenchmarkInputError(
                "--compile needs --warmup-iters 1 or more: the model is compiled in the first "
                "iteration, which must not be timed")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m caraml.node.options graphcore PRECISION`: the precision
    as GC200's trainers take it, for JUBE (its job command)."""
    import sys
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 2 or argv[0] != "graphcore":
        report.error("usage: python -m caraml.node.options graphcore PRECISION")
        return 2
    try:
        report.parameter(graphcore_precision(argv[1]))
    except BenchmarkInputError as err:
        report.error(str(err))
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
