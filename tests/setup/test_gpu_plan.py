"""aux/gpu_plan.py against the real limits of a lent GPU node: 15 minutes of
device time in all, a start of about 3 of them, 10 minutes a call. Every
step lands in a call, each call stays within 8 minutes, both calls with
the start and the transfers stay within the 15; what gpu_check.sh reads
is the plan it printed; a budget too small is one line that says what to
do. The GPU tests' two parts are checked against pytest's own selection."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "aux"))
import gpu_plan

ROOT = Path(__file__).resolve().parents[2]

# the device's limits as lent (docs/gpu_readiness.md)
DEVICE_S, CALL_LIMIT_S, START_S = 15 * 60, 10 * 60, 3 * 60
REAL = gpu_plan.Limits(DEVICE_S, CALL_LIMIT_S, START_S)


@pytest.fixture(scope="module")
def real() -> gpu_plan.Plan:
    return gpu_plan.plan(REAL)


def test_every_step_is_in_one_call_and_node_and_set_up_open_the_first(real):
    names = [s.step.name for c in real.calls for s in c.steps]
    wanted = [s.name for s in gpu_plan.STEPS]
    assert sorted(n for n in names if n not in ("node", "setup")) == sorted(wanted)
    assert [s.step.name for s in real.calls[0].steps[:2]] == ["node", "setup"]
    assert all(c.steps[0].step.name == "setup" for c in real.calls[1:])


def test_two_calls_of_at_most_8_minutes_that_fit_15_minutes_with_the_start(real):
    assert len(real.calls) == 2
    for call in real.calls:
        assert call.length_s <= 8 * 60
        assert sum(s.cap_s for s in call.steps) + gpu_plan.KILL_AFTER_S == call.length_s
    used = START_S + sum(c.length_s for c in real.calls) + len(real.calls) * gpu_plan.TRANSFER_S
    assert used <= DEVICE_S


def test_each_cap_lies_between_its_floor_and_its_need_and_a_cut_is_said(real):
    text = gpu_plan.describe(real)
    for call in real.calls:
        for s in call.steps:
            assert max(s.step.floor_s, gpu_plan.MIN_STEP_S) <= s.cap_s <= s.need_s, s.step.name
            if s.cap_s < s.need_s:
                assert f"  {s.step.name}: {s.cap_s} s of about {s.need_s} s" in text
            if s.size:
                assert f"  {s.step.name}: {s.step.sizes[s.size].form} (the full size" in text
    assert "900 s of 900 s" in text.splitlines()[-1]


def test_with_time_enough_nothing_is_cut():
    limits = gpu_plan.Limits(budget_s=3000)
    roomy = gpu_plan.plan(limits, gpu_plan.select(["gpu_tests", "energy", "power"]))
    assert all(s.cap_s == s.step.sizes[0].need_s and s.size == 0
               for c in roomy.calls for s in c.steps)
    assert "cut to fit" not in gpu_plan.describe(roomy)


def test_the_script_reads_the_plan_it_printed(tmp_path, capsys):
    tsv = tmp_path / "plan.tsv"
    assert gpu_plan.main(["--device-left-s", str(DEVICE_S), "--call-limit-s", str(CALL_LIMIT_S),
                          "--start-s", str(START_S), "--tsv", str(tsv)]) == 0
    printed = capsys.readouterr().out
    rows = [line.split("\t") for line in tsv.read_text().splitlines()]
    for call in ("1", "2"):
        head, *steps = [r for r in rows if r[0] == call]
        assert head[1] == "call" and f"call {call}: {head[2]} s at most" in printed
        assert sum(int(r[2]) for r in steps) + int(head[3]) == int(head[2])
        for r in steps:
            assert f"  {r[1]:<16} cap {int(r[2]):>3} s" in printed


@pytest.mark.parametrize("argv, line", [
    (["--device-left-s", "600"],
     "gpu_check: 600 s of device time leave 390 s for 2 calls of at most 480 s after a start of 180 s "
     "and the transfers, but the steps (gpu_tests_llm, gpu_tests_other, peers_llm, peers_ic, peers_fno, "
     "energy, power, main) need 670 s at their least: ask for 280 s more device time, or fewer --steps"),
    (["--device-left-s", "150"],
     "gpu_check: 150 s of device time leave nothing for a call after a start of 180 s and 2 x 15 s of "
     "transfers (calls of at most 480 s): ask for more device time"),
    (["--budget-s", "100", "--steps", "energy"],
     "gpu_check: --budget-s 100 cannot hold node, setup and energy at their least (145 s): "
     "give --budget-s 145 or more, or fewer --steps"),
    (["--steps", "gpu_tests,fast"],
     "gpu_check: --steps: no step 'fast' (the steps: gpu_tests_llm, gpu_tests_other, peers_llm, "
     "peers_ic, peers_fno, energy, power, main, gpu_tests, peers)"),
])
def test_a_budget_too_small_or_an_unknown_step_is_one_line(argv, line, capsys):
    assert gpu_plan.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [line]


def test_the_smallest_device_time_that_holds_every_step_is_planned_and_one_second_less_is_not():
    """The error's own figure is the way out: that much more is enough"""
    with pytest.raises(gpu_plan.PlanError, match=r"ask for (\d+) s more") as refused:
        gpu_plan.plan(gpu_plan.Limits(600, CALL_LIMIT_S, START_S))
    more = int(refused.value.args[0].split("ask for ")[1].split(" s more")[0])
    fits = gpu_plan.plan(gpu_plan.Limits(600 + more, CALL_LIMIT_S, START_S))
    assert sorted(s.step.name for c in fits.calls for s in c.steps if s.step in gpu_plan.STEPS) == \
        sorted(s.name for s in gpu_plan.STEPS)
    with pytest.raises(gpu_plan.PlanError):
        gpu_plan.plan(gpu_plan.Limits(600 + more - 1, CALL_LIMIT_S, START_S))


def test_the_gpu_tests_two_parts_are_the_llm_drivers_and_every_other_gpu_test():
    """pytest's own -k selection of the first part, collected on the CPU;
    the second part is its complement by construction"""
    llm, other = (next(s for s in gpu_plan.STEPS if s.name == n).sizes[0].args
                  for n in ("gpu_tests_llm", "gpu_tests_other"))
    assert llm[0] == other[0] == "-k" and other[1] == f"not ({llm[1]})"
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider",
                           "--collect-only", "-q", "-m", "gpu", "-k", llm[1], "tests/gpu"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tests = {line.split("::")[1].split("[")[0] for line in done.stdout.splitlines() if "::" in line}
    assert tests == {"test_megatron_backend_trains_800m_on_one_gpu_without_a_caller_made_group",
                     "test_torch_backend_trains_800m_on_one_gpu",
                     "test_both_backends_report_the_same_loss_on_the_same_data_and_seed",
                     "test_two_gpu_layouts_train_and_agree_on_the_loss",
                     "test_auto_micro_batch_fits_the_device_and_the_plan_is_close"}
