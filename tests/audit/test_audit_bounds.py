"""The plausibility bounds on rows as the row model writes them: MFU at
most 1 against the device's peak, power per device within its TDP or set
limit, work per Wh within what the peak allows at that power."""

import pytest

from caraml.audit import bounds
from caraml.audit.findings import MFU_BOUND, POWER_BOUND, WORK_PER_WH_BOUND
from caraml.row.record import Row

# an A100 row of 4 GPUs: 20,000 tokens/s each at 130 TFLOP/s of the model, 300 W each
A100 = dict(benchmark="llm", unit="tokens", system_name="A100", precision="bf16", devices=4, tdp_w=400.0,
            per_s_per_device=20000.0, model_tflops_per_device=130.0, mfu=130 / 312, peak_tflops=312.0,
            peak_basis="datasheet", energy_scope="gpu", energy_devices=4, power_w_per_device=300.0,
            work_per_wh=20000 * 3600 / 300)


def test_a_plausible_row_breaks_no_bound():
    assert bounds.check(Row(**A100), {}, None, None) == []


def test_mfu_above_one_against_the_peak_it_divides_by_is_named_with_it():
    row = Row(**{**A100, "model_tflops_per_device": 624.0, "mfu": 2.0})
    found = bounds.mfu(row, {}, bounds.peak_of(row, None))
    assert [f.rule for f in found] == [MFU_BOUND, MFU_BOUND]
    assert [f.evidence for f in found] == ["MFU 2 stated, above 1", "MFU 2 (stated: 624 TFLOP/s per device) "
                                           "exceeds 1 against its datasheet peak 312 TFLOP/s (bf16)"]


def test_an_mfu_stated_above_one_is_refused_whatever_its_rate():
    row = Row(**{**A100, "mfu": 1.4})
    [found] = bounds.mfu(row, {}, bounds.peak_of(row, None))
    assert found.evidence == "MFU 1.4 stated, above 1"


@pytest.mark.parametrize("watts, refused", [(440.0, False), (441.0, True)])
def test_power_per_device_within_its_tdp_by_ten_percent(watts, refused):
    found = bounds.power(Row(**{**A100, "power_w_per_device": watts, "work_per_wh": 1.0}))
    assert bool(found) is refused
    if refused:
        assert found[0].rule == POWER_BOUND and "exceeds its TDP 400 W by more than 10 %" in found[0].evidence


def test_a_set_power_limit_bounds_the_power_instead_of_the_tdp():
    [found] = bounds.power(Row(**{**A100, "power_limit_w": 250.0}))
    assert found.evidence == "power_w_per_device 300 W exceeds the limit the run set, 250 W by more than 10 %"


def test_a_host_scope_has_no_device_limit():
    assert bounds.power(Row(**{**A100, "energy_scope": "host-estimate", "power_w_per_device": 900.0})) == []


def test_work_per_wh_beyond_what_the_peak_gives_at_that_power():
    # 4 GPUs at 312 TFLOP/s, 6.5 GFLOP a token, 4 x 300 W: at most 576,000 tokens/Wh
    most = 4 * 312e12 / 6.5e9 * 3600 / (300 * 4)
    row = Row(**{**A100, "work_per_wh": most * 1.2})
    [found] = bounds.work_per_wh(row, 6.5e9, bounds.peak_of(row, None))
    assert found.rule == WORK_PER_WH_BOUND
    assert found.evidence.startswith(f"work_per_wh {most * 1.2:.4g} tokens/Wh exceeds the {most:.4g} that "
                                     "its datasheet peak 312 TFLOP/s allows at 300 W per device")
    below = Row(**{**A100, "work_per_wh": most * 0.99})
    assert bounds.work_per_wh(below, 6.5e9, bounds.peak_of(below, None)) == []


def test_a_tdp_left_out_of_the_row_is_taken_from_the_systems_block():
    # the row says no TDP; its system's platform.xml block (system.json, made again) says 400 W
    row = Row(**{**A100, "tdp_w": None, "power_w_per_device": 600.0, "work_per_wh": 1.0})
    assert bounds.power(row) == []
    [found] = bounds.check(row, {"tdp_w": 400.0}, None, None)
    assert found.rule == POWER_BOUND and "exceeds its TDP 400 W" in found.evidence


def test_a_measured_peak_the_driver_refused_bounds_nothing():
    # a CPU run on a busy host: the matmul rate measured below the model's own rate, so the row has no MFU
    row = Row(**{**A100, "tdp_w": None, "energy_scope": "host-estimate", "mfu": None, "peak_tflops": 0.0048,
                 "peak_basis": "measured-matmul", "model_tflops_per_device": 0.0069})
    # made again, its MFU is a figure (0.0069 / 0.0048); the row claims none, so its peak bounds nothing
    assert bounds.check(row, {"model_tflops_per_device": 0.0069, "mfu": 1.44, "work_per_wh": 1e9},
                        6.5e9, None) == []
