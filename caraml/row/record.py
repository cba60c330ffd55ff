"""The row: one flat, typed record of one measured configuration, every
figure under one name with its unit in the name (per_s, wh, work_per_wh,
power_w_per_device, _gib, _tflops, _pct, _s). caraml/row/decide.py fills
it once from what a work package left; every table, file and check shows
it through caraml/row/render.py, under the same names.

row.json holds it (caraml/row/row_json.py, which reads the schema before
into it too). Standard library only (login node)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Row:
    # what ran, and where
    benchmark: str | None = None
    work_package: str = ""
    system_name: str | None = None
    system_description: str | None = None
    device_kind: str | None = None
    device_unit: str | None = None
    tdp_w: float | None = None
    nodes: int | None = None
    devices_per_node: int | None = None
    devices: int | None = None
    # its configuration (label: model, precision, size, compile mode and batch in words)
    model: str | None = None
    precision: str | None = None
    global_batch: int | None = None
    sequence_length: int | None = None
    image_size: int | None = None
    backend: str | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    micro_batch: int | None = None
    params: int | None = None
    compile: str | None = None
    label: str = ""
    # what the benchmark's own columns show (its entry's columns with a source), by column key
    details: dict[str, str] = field(default_factory=dict)
    # throughput over the timed iterations; timed_s: their span (count times mean time)
    unit: str | None = None
    per_s: float | None = None
    per_s_per_device: float | None = None
    per_s_per_node: float | None = None
    per_s_median: float | None = None
    timed_iterations: int | None = None
    time_per_iteration_s: float | None = None
    timed_s: float | None = None
    # the spread of the timed iterations' times (each the slowest rank's)
    time_per_iteration_p10_s: float | None = None
    time_per_iteration_p50_s: float | None = None
    time_per_iteration_p90_s: float | None = None
    # which run of its configuration in its JUBE run (the repeat tag), from 1
    repeat: int | None = None
    # numerics (caraml/node/numerics.py): the first iteration's loss, the last
    # progress line's, the first loss that was not finite and its iteration,
    # the timed iterations whose update was skipped; and the band the
    # benchmark declares (caraml/benchmark_entry.py LossBand): the loss of
    # a model that has learnt nothing, the first loss's tolerance around
    # it (a share), the fall a real corpus needs (a share of the first loss)
    loss_first: float | None = None
    loss_last: float | None = None
    loss_nonfinite: str | None = None
    loss_nonfinite_at: int | None = None
    skipped_iterations: int | None = None
    loss_untrained: float | None = None
    loss_tolerance: float | None = None
    loss_fall_needed: float | None = None
    # MFU and the peak it divides by (peak_windows...: the windows of a measured peak)
    mfu: float | None = None
    model_tflops_per_device: float | None = None
    hardware_tflops_per_device: float | None = None
    peak_tflops: float | None = None
    peak_basis: str | None = None
    peak_source: str | None = None
    peak_windows: int | None = None
    peak_min_tflops: float | None = None
    peak_median_tflops: float | None = None
    peak_spread_pct: float | None = None
    # energy: its scope, the headline window (energy_window) and its figures, then each window's
    energy_scope: str | None = None
    energy_estimated: bool | None = None
    energy_incomplete: bool | None = None
    energy_methods: str | None = None
    energy_basis: str | None = None
    energy_devices: int | None = None
    energy_window: str | None = None
    wh: float | None = None
    wh_per_device: float | None = None
    work_per_wh: float | None = None
    power_w_per_device: float | None = None
    window_s: float | None = None
    wh_run: float | None = None
    wh_per_device_run: float | None = None
    work_per_wh_run: float | None = None
    power_w_per_device_run: float | None = None
    window_s_run: float | None = None
    energy_complete_run: bool | None = None
    wh_timed: float | None = None
    wh_per_device_timed: float | None = None
    work_per_wh_timed: float | None = None
    power_w_per_device_timed: float | None = None
    window_s_timed: float | None = None
    energy_complete_timed: bool | None = None
    # the share of the run jpwr's samples missed and covered
    energy_missing_pct: float | None = None
    energy_covered_pct: float | None = None
    # the accelerators alone over the whole run: the scope every GPU system has
    work_per_wh_gpu: float | None = None
    energy_by_scope: dict[str, float] = field(default_factory=dict)
    energy_by_node: dict[str, float] = field(default_factory=dict)
    counter_vs_integrated_pct: float | None = None
    # the nodes' energy from the centre's meter, as Slurm's energy accounting
    # read it (caraml/job/node_energy.py): its own figure beside jpwr's,
    # never added to it. Its state (measured, none, failed, missing,
    # unreadable, incomplete) and why there is no figure; node_wh only where
    # the meter covers whole nodes (scope node), over its window (job: the job
    # script's run, warm-up and start-up included), summed over the job's nodes
    node_energy_state: str | None = None
    node_energy_reason: str | None = None
    node_energy_source: str | None = None
    node_energy_scope: str | None = None
    node_energy_window: str | None = None
    node_wh: float | None = None
    node_window_s: float | None = None
    node_power_w_per_node: float | None = None
    # the run's work over node_wh: the work of the job over its nodes' energy
    work_per_node_wh: float | None = None
    # the accelerators' share of the node's energy where jpwr measured both
    # over one window (its by-scope line: the whole run), and which two scopes
    accelerator_share_of_node_pct: float | None = None
    accelerator_share_basis: str | None = None
    # every run's power limit (caraml/row/power_limit.py): rank 0's device's at the start, before
    # the job set any, and its default; the groups of ranks whose device began away from its default
    power_limit_at_start_w: float | None = None
    power_limit_default_w: float | None = None
    power_limit_not_default_at_start: tuple[str, ...] = ()
    # a power-limit sweep's point: as asked, its watts, scope, who set it (suite or external), the
    # limit before and as reported, whether it was put back and by whom (ranks or guard), the ranks
    # that reported another limit than rank 0's, the stop signals that put it back before the end
    power_limit: str | None = None
    power_limit_asked_w: float | None = None
    power_limit_scope: str | None = None
    power_limit_mode: str | None = None
    power_limit_before_w: float | None = None
    power_limit_w: float | None = None
    power_limit_restored: bool | None = None
    power_limit_restored_by: str | None = None
    power_limit_differs_on_ranks: tuple[str, ...] = ()
    power_limit_put_back_early: tuple[str, ...] = ()
    # peak device memory over the timed iterations
    memory_max_allocated_gib: float | None = None
    memory_max_reserved_gib: float | None = None
    memory_device_gib: float | None = None
    # the status (caraml/row/status.py), its flags and the one verdict (caraml/row/verdict.py)
    state: str = "failed"
    reason: str = ""
    flags: tuple[str, ...] = ()
    # how often Slurm requeued the job (a node that failed): the row is its last attempt's
    requeued: int | None = None
    measurement: bool = False
    not_a_measurement: str = ""
    dry_run: bool = False
    # why the row is not in the results history (caraml/row/history.py); "" where it is or need not be
    history_error: str = ""
    # where it came from (commit: 12 hex digits; suite_version adds +changes where not clean)
    commit: str | None = None
    clean: bool | None = None
    suite_version: str | None = None
    torch: str | None = None
    cuda: str | None = None
    rocm: str | None = None
    date: str | None = None
    node_host: str | None = None
    driver: str | None = None
    container: str | None = None
    hipblaslt_allow_tf32: str | None = None


FIELDS = tuple(f.name for f in dataclasses.fields(Row))
# each field's kind, from its declaration: number, whole, flag, text, words (a tuple) or pairs (a mapping)
KINDS = {f.name: ("pairs" if f.type.startswith("dict") else "words" if f.type.startswith("tuple")
                  else "flag" if f.type.startswith("bool") else "whole" if f.type.startswith("int")
                  else "number" if f.type.startswith("float") else "text")
         for f in dataclasses.fields(Row)}


def _typed(name: str, value: Any) -> Any:
    """A stored value as its field's kind (JSON keeps 4 and 4.0 apart; a
    file of another tool may not)."""
    kind = KINDS[name]
    if value is None:
        return {"pairs": {}, "words": ()}.get(kind)
    if kind == "words":
        return tuple(str(v) for v in value)
    if kind == "pairs":
        return dict(value)
    if kind == "whole" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def make(values: dict) -> Row:
    """A row of these fields (the others at their defaults), each as its kind."""
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise TypeError(f"no field of a row: {', '.join(unknown)}")
    return Row(**{name: _typed(name, value) for name, value in values.items()})


def timed_span(iterations: float | None, per_iteration_s: float | None,
               window_s: float | None) -> float | None:
    """The timed iterations' span: their count times their mean time, else
    the timed energy window's duration (a run that names no iteration time)."""
    if iterations is not None and per_iteration_s is not None:
        return iterations * per_iteration_s
    return window_s


def gpu_work_per_wh(scope: str | None, run_work_per_wh: float | None, run_wh: float | None,
                    gpu_wh: float | None) -> float | None:
    """Work per Wh of the accelerators alone over the whole run: the run's
    own where it counts the gpu scope, else the run's work over the gpu
    scope's Wh (jpwr's by-scope line covers the whole run); None where the
    row has no GPU channel."""
    if scope == "gpu":
        return run_work_per_wh
    if run_work_per_wh is None or not run_wh or not gpu_wh:
        return None
    return run_work_per_wh * run_wh / gpu_wh
