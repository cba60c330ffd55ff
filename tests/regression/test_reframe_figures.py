"""A decided row as ReFrame reads it: sanity, performance variables (the
same in every run of a benchmark) with their energy scope, references from caraml-compare's reader (the same
verdict in both) and the perflog's provenance."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from caraml.compare import reference
from caraml.compare.rows import RunDir, line
from caraml.regression import figures
from caraml.row import render
from caraml.row.record import make
from caraml.row.verdict import judged

ROW = judged(make({
    "benchmark": "llm", "work_package": "/stage", "system_name": "CPU", "device_kind": "cpu",
    "device_unit": "host", "nodes": 1, "devices_per_node": 1, "devices": 1,
    "model": "cpu-small", "precision": "fp32", "global_batch": 4, "sequence_length": 256, "backend": "torch",
    "label": "cpu-small fp32 batch 4", "unit": "tokens", "per_s": 1000.0, "per_s_per_device": 1000.0,
    "per_s_per_node": 1000.0, "timed_iterations": 90, "time_per_iteration_s": 1.0, "timed_s": 90.0,
    "mfu": 0.06, "peak_tflops": 0.1, "peak_basis": "measured-matmul",
    "energy_scope": "host-estimate", "energy_estimated": True, "energy_methods": "estimate",
    "energy_window": "timed", "work_per_wh": 250000.0, "power_w_per_device": 6.0, "wh": 0.01,
    "work_per_wh_timed": 250000.0, "power_w_per_device_timed": 6.0, "wh_timed": 0.01,
    "energy_complete_timed": True, "work_per_wh_run": 240000.0, "power_w_per_device_run": 6.1,
    "wh_run": 0.02, "energy_complete_run": True, "state": "ok",
    "commit": "abc123def456", "suite_version": "abc123def456", "torch": "2.13.0"}))


def _row(**changes):
    return judged(dataclasses.replace(ROW, **changes))


def test_performance_variables_name_the_work_and_their_units_the_energy_scope():
    assert ROW.measurement
    assert figures.perf_values(ROW) == {
        "tokens_per_s": (1000.0, "tokens/s"),
        "tokens_per_s_per_device": (1000.0, "tokens/s per host"),
        "tokens_per_s_per_node": (1000.0, "tokens/s per node"),
        "mfu": (0.06, "fraction of peak"),
        "tokens_per_wh": (250000.0, "tokens/Wh (host-estimate, timed window, estimated)"),
        "power_w_per_device": (6.0, "W per host (host-estimate, timed window, estimated)"),
    }


def test_a_benchmark_has_the_same_variables_in_every_run():
    """A perflog's columns never change: a figure the row lacks is NaN, not left out."""
    values = figures.perf_values(_row(mfu=None, energy_scope=None, work_per_wh=None, power_w_per_device=None))
    assert list(values) == list(figures.perf_values(ROW))
    assert all(math.isnan(values[name][0]) for name in ("mfu", "tokens_per_wh", "power_w_per_device"))
    image = figures.perf_values(_row(benchmark="image", unit="images"))
    assert list(image) == ["images_per_s", "images_per_s_per_device", "images_per_s_per_node",
                           "images_per_wh", "power_w_per_device"]


def test_a_figure_the_row_lacks_is_named_with_the_rows_own_reason():
    """ReFrame makes each an expected failure that says why (regression/checks)."""
    refused = "mfu-not-available(matmul-rate-measured-on-a-host-whose-CPU-other-processes-used-61%)"
    row = _row(mfu=None, flags=("cpu-contention(61%-of-host-CPU-used-by-other-processes)", refused))
    assert render.missing(row) == {"mfu": refused}
    assert render.missing(_row(work_per_wh=None, power_w_per_device=None)) == {
        "tokens_per_wh": "the row has no tokens_per_wh figure",
        "power_w_per_device": "the row has no power_w_per_device figure"}
    assert render.missing(ROW) == {}


def test_the_55_iterations_in_8_s_row_is_no_measurement_and_every_figure_an_expected_failure():
    """The row JUBE's issues table and caraml-compare call no measurement:
    its figures never pass, each an expected failure naming the verdict."""
    row = _row(timed_iterations=55, time_per_iteration_s=8 / 55, timed_s=8.0)
    why = "not a measurement (55 timed iterations in 8 s; a measurement needs 20 and 60 s)"
    assert figures.sanity(row) == (True, "")
    assert all(math.isnan(value) for value, _ in figures.perf_values(row).values())
    assert set(render.missing(row).values()) == {why}
    assert figures.provenance(row)["measurement"] == why


def test_reframe_reads_a_figure_the_row_lacks_as_an_expected_failure_with_that_reason():
    """The reference as the check assigns it, in ReFrame's scoped form: the
    lacking MFU is ReFrame's expected failure."""
    from reframe.core.builtins import xfail
    from reframe.utility import ScopedDict

    refused = "mfu-not-available(only-3-of-10-matmul-windows-reached-half-the-best)"
    row = _row(mfu=None, flags=(refused,))
    key = "slurm-cpu:default"
    scoped = ScopedDict(figures.reframe_reference(row, figures.load_references(), key, xfail))
    lacking = scoped[f"{key}:mfu"]
    assert (type(lacking).__name__, lacking.message) == ("XFailReference", f"mfu: {refused}")
    assert lacking.data == (0, None, None, figures.perf_values(row)["mfu"][1])


@pytest.mark.parametrize("state, flags, measurement", [
    ("ok", (), True),
    ("ok-stopped-early", ("stopped-early(4-of-6-iterations)",), True),
    ("ok", ("cpu-contention(51%-of-host-CPU-used-by-other-processes)",), True),
    ("failed", (), False),
])
def test_sanity_passes_a_row_whose_job_ran_and_the_verdict_decides_the_rest(state, flags, measurement):
    row = _row(state=state, reason="out of memory" if state == "failed" else "", flags=flags)
    ok, why = figures.sanity(row)
    assert ok is (state != "failed") and row.measurement is measurement
    if state == "failed":
        assert why == "row failed: out of memory"
    # energy whose headline window is not whole: the verdict's, never a pass
    partial = _row(energy_complete_timed=False, energy_complete_run=False, energy_window="run",
                   energy_covered_pct=80.0)
    assert figures.sanity(partial)[0] and not partial.measurement
    assert set(render.missing(partial).values()) == {
        "not a measurement (its energy is not whole (its samples cover 80 % of the run))"}


def _reference_file(tmp_path, value: float, figure: str = "throughput", **narrow) -> str:
    extra = "".join(f", {k}: {v}" for k, v in narrow.items())
    path = tmp_path / "refs.yaml"
    path.write_text("references:\n"
                    f"  - {{system: CPU, benchmark: llm, model: cpu-small, figure: {figure}, value: {value},"
                    f" lower: 0.2, upper: 0.5, kind: measured by this suite, source: test{extra}}}\n")
    return path


def test_a_reference_becomes_reframes_band_with_a_negative_lower_threshold(tmp_path):
    refs = figures.load_references([_reference_file(tmp_path, 1200.0)], suite=False)
    assert figures.references(ROW, refs, "local:cpu") == {
        "local:cpu": {"tokens_per_s": (1200.0, pytest.approx(-0.2), pytest.approx(0.5), "tokens/s")}}


def test_work_per_wh_references_reach_the_energy_variable(tmp_path):
    refs = figures.load_references([_reference_file(tmp_path, 1e5, "work_per_wh")], suite=False)
    [(name, band)] = figures.references(ROW, refs, "k")["k"].items()
    assert name == "tokens_per_wh" and band[0] == 1e5


def test_a_reference_for_another_batch_does_not_apply(tmp_path):
    refs = figures.load_references([_reference_file(tmp_path, 1200.0, global_batch=8)], suite=False)
    assert figures.references(ROW, refs, "local:cpu") == {}


@pytest.mark.parametrize("value", [900.0, 1200.0, 1300.0, 2500.0])
def test_reframes_verdict_is_caraml_compares(tmp_path, value):
    refs = figures.load_references([_reference_file(tmp_path, value)], suite=False)
    ref, lower, upper, _ = figures.references(ROW, refs, "k")["k"]["tokens_per_s"]
    measured = ROW.per_s
    # ReFrame's check: ref * (1 + lower) <= value <= ref * (1 + upper)
    reframe_fails = not ref * (1 + lower) <= measured <= ref * (1 + upper)
    [verdict] = reference.verdicts(pd.DataFrame([line(ROW, RunDir(tmp_path, None), tmp_path / "row.json")]),
                                   refs)["verdict"]
    assert reframe_fails == (verdict != "within")


def test_the_suites_own_published_reference_applies_to_its_system_and_none_to_a_cpu_row():
    refs = figures.load_references()
    gh200 = _row(system_name="GH200", device_kind="cuda", device_unit="GPU", model="800M", precision="bf16",
                 backend="megatron", sequence_length=2048)
    band = figures.references(gh200, refs, "GH200:gpu")["GH200:gpu"]["tokens_per_s_per_device"]
    assert band[:3] == pytest.approx((47505, -0.15, 0.25))
    # CPU is whichever host runs it: no host's figure is another's reference
    assert not figures.references(ROW, refs, "local:cpu").get("local:cpu")


def test_provenance_for_the_perflog():
    prov = figures.provenance(_row(flags=("cpu-contention(51%)",)))
    assert prov == {"commit": "abc123def456", "suite_version": "abc123def456", "torch": "2.13.0",
                    "energy_methods": "estimate", "energy_scope": "host-estimate",
                    "energy_kind": "estimated", "energy_window": "timed", "system": "CPU",
                    "config": "cpu-small fp32 batch 4", "flags": "cpu-contention(51%)", "status": "ok",
                    "measurement": "yes"}
    assert figures.provenance(_row(energy_scope=None))["energy_scope"] == "n/a"


def test_a_centres_reference_the_reframe_way_merges_with_the_file_and_the_stricter_bound_wins(tmp_path):
    # the file: 1200 tokens/s, 960 .. 1800; the centre's subclass: 1100, at least 1045, no upper bound
    refs = figures.load_references([_reference_file(tmp_path, 1200.0)], suite=False)
    centre = {"tokens_per_s": (1100.0, -0.05, None, "tokens/s"),
              "tokens_per_s_per_node": (500.0, -0.1, 0.1, "tokens/s per node"),
              "not_a_variable": (1.0, None, None, "x")}
    merged = figures.reframe_reference(ROW, refs, "k", lambda why, ref: ("xfail", why), centre)["k"]
    # both apply: the centre's higher lower bound, the file's upper bound
    value, lower, upper, unit = merged["tokens_per_s"]
    assert (value * (1 + lower), value * (1 + upper), unit) == \
        (pytest.approx(1045.0), pytest.approx(1800.0), "tokens/s")
    # a figure only the centre gives keeps its band; a name that is no variable is left out
    assert merged["tokens_per_s_per_node"] == (500.0, -0.1, 0.1, "tokens/s per node")
    assert "not_a_variable" not in merged


def test_the_stricter_of_two_references():
    assert figures.stricter((100.0, -0.1, 0.1, "u"), (120.0, -0.5, None, "u"), "u") == (100.0, -0.1, 0.1, "u")
    assert figures.stricter((100.0, -0.1, 0.1, "u"), None, "w") == (100.0, -0.1, 0.1, "u")
    assert figures.stricter(None, (100.0, None, 0.2, "u"), "u") == (100.0, None, 0.2, "u")


NODE = {"node_energy_state": "measured", "node_energy_scope": "node", "node_energy_window": "job",
        "node_energy_source": "slurm-acct_gather_energy/pm_counters", "node_wh": 0.5,
        "work_per_node_wh": 180000.0}


def test_a_partition_that_meters_whole_nodes_has_the_nodes_energy_as_variables():
    row = _row(**NODE)
    values = figures.perf_values(row)
    assert list(values) == [*figures.perf_values(ROW), "node_wh", "tokens_per_node_wh"]
    label = "node, job window, slurm-acct_gather_energy/pm_counters"
    assert values["node_wh"] == (0.5, f"Wh of the nodes ({label})")
    assert values["tokens_per_node_wh"] == (180000.0, f"tokens/Wh of the nodes ({label}, the run's tokens)")
    # a meter that gave no figure this time: its reason; its columns stay
    failed = _row(**{**NODE, "node_energy_state": "failed", "node_wh": None, "work_per_node_wh": None,
                     "node_energy_reason": "no node energy at the job's end: sstat gives no energy"})
    assert list(figures.perf_values(failed)) == list(values)
    assert render.missing(failed) == {name: "no node energy at the job's end: sstat gives no energy"
                                      for name in ("node_wh", "tokens_per_node_wh")}
    # a cluster that meters no whole node (no plugin, RAPL's sockets, a local partition): no such variables
    for scope in (None, "cpu-socket+dram"):
        assert "node_wh" not in figures.perf_values(_row(node_energy_scope=scope))


def test_a_work_per_node_wh_reference_reaches_the_node_variable_where_there_is_one(tmp_path):
    refs = figures.load_references([_reference_file(tmp_path, 2e5, "work_per_node_wh")], suite=False)
    [(name, band)] = figures.references(_row(**NODE), refs, "k")["k"].items()
    assert name == "tokens_per_node_wh" and band[0] == 2e5
    assert figures.references(ROW, refs, "k") == {}
    [verdict] = reference.verdicts(pd.DataFrame([line(_row(**NODE), RunDir(tmp_path, None),
                                                      tmp_path / "row.json")]), refs)["verdict"]
    assert verdict == "within"  # 180 000 tokens/Wh in 160 000 .. 300 000


def test_the_expected_failure_says_the_verdict_once_after_the_variables_it_holds_for():
    """ReFrame's XFAIL line joins the messages of the failing variables in
    their order with ', ' (reframe/core/pipeline.py); each reason once."""
    row = _row(**NODE, timed_iterations=3, timed_s=2.5)
    messages = figures.xfail_messages(render.missing(row))
    joined = ", ".join(messages.values())
    why = "not a measurement (3 timed iterations in 2.5 s; a measurement needs 20 and 60 s)"
    assert joined == ("tokens_per_s, tokens_per_s_per_device, tokens_per_s_per_node, mfu, tokens_per_wh, "
                      f"power_w_per_device, node_wh, tokens_per_node_wh: {why}")
    assert joined.count("not a measurement") == 1
    # a measurement lacking two figures for two reasons names each after its own
    lacking = _row(**{**NODE, "node_wh": None, "work_per_node_wh": None, "node_energy_reason": "meter down"},
                   mfu=None, flags=("mfu-not-available(busy)",))
    assert ", ".join(figures.xfail_messages(render.missing(lacking)).values()) == \
        "mfu: mfu-not-available(busy), node_wh, tokens_per_node_wh: meter down"
