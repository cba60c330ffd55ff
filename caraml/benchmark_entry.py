"""What an entry of the benchmark table (caraml/benchmarks.py) says of its
benchmark: its driver, JUBE script and unit of work, the figures of its
summary line, how its configuration is read, its own columns of the full
table, its data step, the job of its time to solution and its ReFrame
configurations. A site's entry file builds one `Benchmark` from these
(docs/adding_a_benchmark.md). Standard library only: the login node reads it."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import SupportsFloat

from caraml.report import kv_lines


def number(value: object) -> float | None:
    if not isinstance(value, (SupportsFloat, str)):
        return None
    try:
        found = float(value)
    except ValueError:
        return None
    return found if found == found else None  # nan: unknown


def whole(value: object) -> int | None:
    found = number(value)
    return None if found is None else int(found)


@dataclass(frozen=True)
class Figures:
    """The names of a benchmark's figures in its driver's summary line
    (`CARAML global:`): the rate (mean and median, per device) and the work
    of the whole loop and of its timed iterations."""

    per_s: str
    per_s_median: str
    per_s_per_device: str
    work_total: str = "samples_total"
    work_timed: str = "samples_timed"


@dataclass(frozen=True)
class Column:
    """A column of the full table (result/result_csv.dat): its title, the
    row's field it shows, and where a value no field of the row holds comes
    from: `global.<key>` (the driver's summary line), `param.<name>` (the
    work package's JUBE parameter) or `data.<key>` (the data step's
    `CARAML data:` line); the row model keeps such a value in the row's
    details under the column's field name."""

    title: str
    field: str
    source: str | None = None
    format: str | None = None


def data_line(stdout: str) -> dict[str, str]:
    """What a data step's last `CARAML data: key=value ...` line says."""
    found = kv_lines(stdout, "CARAML data:")
    return found[-1] if found else {}


@dataclass(frozen=True)
class DataStep:
    """A benchmark's data step: the JUBE step that prepares its data before
    the job (its failure is the row's cause; its stdout gives the `data.`
    columns through describe), and the JUBE parameter that holds the step's
    arguments to the suite's Python, which ReFrame's checks run too
    (None: ReFrame cannot prepare the data)."""

    step: str = "prepare_data"
    args: str | None = None
    describe: Callable[[str], dict[str, str]] = data_line


@dataclass(frozen=True)
class JobSetting:
    """A caraml-compare option that sizes a benchmark's job (--epochs 90)."""

    name: str
    flag: str
    default: float | None
    help: str


@dataclass(frozen=True)
class Job:
    """The job a time and energy to solution is computed for: the model and
    size that stand for it (size None: any), the work one training takes
    for a row (its model, size and parameter count; caraml-compare's
    settings) with how it was chosen, and the settings that size it. A
    setting in `any_model` (a fixed token count) makes every model of the
    benchmark stand for the job."""

    representative: tuple[str, float | None]
    work: Callable[[Mapping[str, object], Mapping[str, float | None]], tuple[float, str]]
    settings: tuple[JobSetting, ...] = ()
    any_model: str | None = None

    def stands_for(self, model: object, size: float, settings: Mapping[str, float | None]) -> bool:
        if self.any_model is not None and settings.get(self.any_model) is not None:
            return True
        wanted, wanted_size = self.representative
        return model == wanted and (wanted_size is None or size == wanted_size)


def epochs_job(representative: tuple[str, float | None], unit: str, epochs: JobSetting,
               per_epoch: JobSetting) -> Job:
    """A job of so many epochs of so many units each."""
    def work(row: Mapping[str, object], settings: Mapping[str, float | None]) -> tuple[float, str]:
        count, size = settings[epochs.name], settings[per_epoch.name]
        if count is None or size is None:
            return float("nan"), f"n/a: no {epochs.flag if count is None else per_epoch.flag} given"
        return count * size, f"{count:g} epochs of {size:,.0f} {unit}".replace(",", " ")
    return Job(representative, work, (epochs, per_epoch))


@dataclass(frozen=True)
class LossBand:
    """The band a benchmark's loss keeps in a run whose numbers mean what
    they claim; a row outside it is not a measurement (the row model's
    verdict). `untrained` gives, from the driver's summary line, the loss
    of a model that has learnt nothing (ln of its classes for a classifier:
    the cross-entropy of a uniform guess); the first iteration's loss must
    lie within `tolerance` (a share of it) of that, which shows the model
    computes what it claims. `learns` tells from the work package's
    parameters and the data step's line whether the run trained on a real
    corpus, where the loss must also fall by at least `fall` (a share of
    the first loss) by the last progress line. None: no such check."""

    untrained: Callable[[Mapping[str, str]], float | None]
    tolerance: float
    learns: Callable[[Mapping[str, str], Mapping[str, str]], bool] | None = None
    fall: float | None = None

    def facts(self, g: Mapping[str, str], params: Mapping[str, str],
              data: Mapping[str, str]) -> dict[str, float | None]:
        """What a row carries of the band: the untrained loss, the tolerance
        and the fall a real corpus needs (None on synthetic data)."""
        learns = self.learns is not None and self.learns(params, data)
        return {"loss_untrained": self.untrained(g), "loss_tolerance": self.tolerance,
                "loss_fall_needed": self.fall if learns else None}


def ln_of(key: str) -> Callable[[Mapping[str, str]], float | None]:
    """The untrained loss of a classifier whose class count the summary
    line gives under `key`."""
    def untrained(g: Mapping[str, str]) -> float | None:
        count = number(g.get(key))
        return math.log(count) if count and count > 1 else None
    return untrained


@dataclass(frozen=True)
class ReFrame:
    """A benchmark's ReFrame checks: the JUBE tags of each configuration
    besides the system's, and tags that make a configuration one work
    package."""

    configurations: tuple[str, ...] = ("smoke",)
    tags: tuple[str, ...] = ()


def default_config(g: dict[str, str], params: dict[str, str]) -> dict:
    """A data-parallel benchmark's configuration: the driver's line first,
    the work package's parameters where the line lacks a value."""
    return {"model": g.get("model") or params.get("model") or None,
            "precision": g.get("precision") or params.get("precision") or None,
            "global_batch": whole(g.get("global_batch_size")) or whole(params.get("global_batch_size")),
            "sequence_length": None, "image_size": None, "backend": None,
            "tp": None, "pp": None, "dp": None,
            "micro_batch": whole(g.get("batch_size_per_device"))
            or whole(params.get("batch_size_per_device")),
            "params": None, "compile": None}


def default_columns(unit: str) -> tuple[Column, ...]:
    """The full table's columns of a benchmark that declares none: its
    model, rate, memory and work per Wh, titled with its unit."""
    name = unit.capitalize()
    return (Column("Model", "model"), Column(f"{name}/s", "per_s"),
            Column(f"{name}/s/device", "per_s_per_device"),
            *TIMED, *MEMORY_COLUMNS,
            Column(f"{name}/Wh", "work_per_wh_timed"), Column(f"Run{name}/Wh", "work_per_wh_run"))


# the driver core's columns, which every benchmark's set shows: its timed
# iterations and their time, and the peak memory
TIMED = (Column("Time/iteration(s)", "time_per_iteration_s", format=".4g"),
         Column("Iterations", "timed_iterations"))
MEMORY_COLUMNS = (Column("MaxAllocated/device(GiB)", "memory_max_allocated_gib", format=".2f"),
                  Column("MaxReserved/device(GiB)", "memory_max_reserved_gib", format=".2f"),
                  Column("Memory/device(GiB)", "memory_device_gib", format=".1f"))


@dataclass(frozen=True)
class Benchmark:
    """One benchmark. `name` is the row model's name for it (JUBE's
    row_benchmark, row.json's benchmark) and the key reference files give."""

    name: str
    driver: str  # the module the job runs on every rank
    script: str  # its JUBE script, from the checkout (or absolute)
    outpath: str  # the JUBE script's outpath (run folders), from the checkout
    unit: str  # the unit of work: tokens, images, samples
    figures: Figures
    config: Callable[[dict[str, str], dict[str, str]], dict] = default_config
    # its own columns of the full table, between the shared head and tail; empty: default_columns
    columns: tuple[Column, ...] = ()
    data_step: DataStep | None = None
    # the job of its time and energy to solution; None: none (no row extrapolated)
    job: Job | None = None
    # the size two rows must share to be like for like: the config's key,
    # its label and the label where the row has none; None: no size (the
    # label is the compile mode)
    size: tuple[str, str, str] | None = None
    # the rows of one model and size differ by backend (megatron, torch)
    variant_by_backend: bool = False
    reframe: ReFrame = field(default_factory=ReFrame)
    # Vendor trainers' own line (Graphcore's), where the driver's line is
    # missing, and the parameter that turns its samples into the unit
    vendor_rate: re.Pattern | None = None
    vendor_sample_param: str | None = None
    # Graphcore's GPT-2 logs one line a step, each step one global batch
    vendor_steps: re.Pattern | None = None
    # the README's main command runs it with the smoke tag on a LOCAL host
    # with GPUs (its full default there takes tens of minutes)
    local_smoke: bool = False
    # its driver reports MFU (model FLOPs over the device's peak)
    mfu: bool = False
    # the band its loss keeps; None: its rows' loss is not judged
    loss_band: LossBand | None = None
    # the function ("module:function") that counts one iteration's work, FLOPs
    # and parameters again from the model a run kept with its iterations
    # (caraml/node/iterations.py), which the audit runs (caraml/audit); None:
    # one iteration's work is its global batch and it counts no FLOPs
    work_formula: str | None = None

    @property
    def table_columns(self) -> tuple[Column, ...]:
        return self.columns or default_columns(self.unit)

    @property
    def markers(self) -> tuple[str, ...]:
        """What a process running this benchmark's driver has in its command line."""
        return (self.driver, self.driver.rsplit(".", 1)[-1] + ".py")
