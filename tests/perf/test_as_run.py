"""aux/perf/as_run.py, the peer scripts' as-run comparison, with real
processes in place of the drivers and the plain loops (a few lines of
Python without torch, timed by the driver core's IterationTimer or by the
plain loop's own time_plain): the figures read from their lines, the
sides by turns, time-sliced turns given up between iterations, the rounds
refused where a side was stopped inside an iteration or an iteration
outlasted a turn, and the ratios by the mean. It measures nothing: every
figure it checks is given or follows from the steps' own lengths."""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "aux" / "perf"))

import as_run  # noqa: E402
import turns  # noqa: E402

DRIVER = ["-m", "tests.perf.driver_side"]


def test_the_drivers_figures_come_from_its_last_summary_line(tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent("""\
        print("CARAML global: time_per_iteration_s=9 time_per_iteration_median_s=9 cpu_s_per_iteration=9")
        print("CARAML global: time_per_iteration_s=0.3 time_per_iteration_median_s=0.25 "
              "cpu_s_per_iteration=0.5 loss=3")
        """))
    assert as_run.suite_run([str(driver), "x"], {}) == as_run.Run(0.3, 0.25, 0.5)


@pytest.mark.parametrize("printed, says", [
    ("CARAML global: time_per_iteration_s=- time_per_iteration_median_s=- cpu_s_per_iteration=-",
     "no timed figure"),
    ("CARAML global: time_per_iteration_median_s=0.2 cpu_s_per_iteration=0.1", "no timed figure"),
    ("import sys; sys.exit(3)", "ended with status 3"),
])
def test_a_driver_without_a_figure_fails_the_comparison_with_one_line(tmp_path, printed, says):
    driver = tmp_path / "driver.py"
    driver.write_text(printed if printed.startswith("import") else f"print({printed!r})\n")
    with pytest.raises(as_run.RunFailed, match=says):
        as_run.suite_run([str(driver), "x"], {})


def plain_script(tmp_path: Path, name: str, steps: str, warmup: int = 1) -> Path:
    """A peer script's plain process: time_plain over `steps`, the
    seconds of CPU time each step burns"""
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(f"""\
        import itertools, sys, time
        sys.path.insert(0, {str(ROOT / "aux" / "perf")!r})
        import as_run
        lengths = itertools.cycle({steps})
        def step():
            start, seconds = time.process_time(), next(lengths)
            while time.process_time() - start < seconds:
                pass
        as_run.time_plain(step, warmup={warmup}, iterations=len({steps}), sync=lambda: None)
        """))
    return script


def test_the_plain_loop_reports_the_mean_of_its_timed_iterations_with_the_median_beside(tmp_path):
    """One long iteration among short ones moves the mean, the figure a
    row reports (work over the timed window), and not the median"""
    script = plain_script(tmp_path, "peer", "[0.0, 0.0, 0.3, 0.0, 0.0]", warmup=0)
    run = as_run.plain_run(script, [], {})
    assert run.mean_s >= 0.3 / 5
    assert run.median_s < run.mean_s
    assert run.cpu_s >= 0.3 / 5


def test_a_rounds_ratio_is_the_plain_loops_mean_over_the_suites_with_the_median_beside():
    suite, plain = as_run.Run(2.0, 1.0, 2.0), as_run.Run(1.0, 1.0, 1.0)
    s = as_run.summary([as_run.Round((suite, plain))])
    assert s["ratio_wall"] == [0.5] and s["ratio_wall_median"] == 0.5
    assert s["ratio_wall_by_median"] == [1.0] and s["ratio_cpu"] == [0.5]


def test_the_sides_take_turns_and_only_the_rounds_that_count_are_summarised():
    order, said = [], []
    suite = iter([as_run.Run(1.0, 1.0, 2.0), as_run.Run(2.0, 2.0, 2.0), as_run.Run(1.0, 1.0, 1.0)])
    plain = iter([as_run.Run(0.9, 0.9, 1.0), as_run.Run(2.2, 2.2, 3.0), as_run.Run(1.0, 1.0, 1.0)])
    done = as_run.interleaved(3, as_run.by_turns(lambda: order.append("suite") or next(suite),
                                                 lambda: order.append("plain") or next(plain)),
                              say=said.append)
    assert order == ["suite", "plain", "plain", "suite", "suite", "plain"]
    assert len(said) == 3 and all(len(r.load["load_1min"]) == 2 for r in done)
    s = as_run.summary(done)
    assert s["ratio_wall"] == pytest.approx([0.9, 1.1, 1.0])
    assert s["ratio_wall_median"] == pytest.approx(1.0) and s["ratio_wall_best"] == pytest.approx(1.1)
    assert s["ratio_cpu"] == pytest.approx([0.5, 1.5, 1.0]) and s["ratio_cpu_median"] == pytest.approx(1.0)
    # the fastest runs: the plain loop's 0.9 s over the suite's 1.0 s
    assert s["ratio_wall_fastest"] == pytest.approx(0.9)
    assert as_run.row("driver", s)[:6] == ["driver", "1.0000", "1.0000", "1.000x", "0.900-1.100",
                                           "1.000x"]
    # a refused round is in the record and in no ratio
    refused = as_run.Round((as_run.Run(1.0, 1.0, 1.0), as_run.Run(9.0, 9.0, 9.0)), ("stopped",))
    with_refused = as_run.summary([*done, refused])
    assert with_refused["ratio_wall"] == s["ratio_wall"] and with_refused["refused"] == 1
    assert with_refused["rounds"][-1]["refused"] == ["stopped"]


def test_too_many_refused_rounds_stop_the_comparison_and_say_it_cannot_conclude():
    good = as_run.Round((as_run.Run(1.0, 1.0, 1.0), as_run.Run(1.0, 1.0, 1.0)))
    bad = as_run.Round(good.runs, ("a timed iteration of the plain loop took 9 s, longer than a turn",))
    outcomes, said = iter([good, bad, good, bad]), []
    done = as_run.interleaved(8, lambda first: next(outcomes), refusals=1, say=said.append)
    assert len(done) == 4  # the second refusal is one too many
    message = as_run.inconclusive(done, 8)
    assert message.startswith("cannot conclude: 2 of 4 rounds refused, 2 of 8 counted")
    assert "refused: a timed iteration of the plain loop took 9 s" in said[1]
    assert said[-1] == f"# {message}"
    assert as_run.inconclusive([good] * 8, 8) is None


def test_the_medians_interval_draws_whole_rounds_and_is_the_same_every_time():
    rounds = [0.95, 1.02, 0.99, 1.01, 0.97, 1.00, 0.98, 1.03, 0.96, 1.01, 0.99]
    low, high = as_run.median_interval(rounds)
    assert min(rounds) < low < statistics.median(rounds) < high < max(rounds)
    assert as_run.median_interval(rounds) == (low, high)
    # rounds that agree leave no doubt; one round leaves no interval
    assert as_run.median_interval([1.01] * 5) == pytest.approx((1.01, 1.01))
    assert all(math.isnan(v) for v in as_run.median_interval([1.0]))


def stamping(tmp_path: Path, name: str, iterations: int, step_s: float, gives_up: bool = True) -> list[str]:
    """A side's command: `iterations` steps, each burning `step_s` of CPU
    time while it stamps the clock, every timed one's span kept as a
    time-sliced side keeps it; with `gives_up`, it gives up its turn
    between steps (Turns.boundary), else only before its first"""
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(f"""\
        import array, json, sys, time
        sys.path.insert(0, {str(ROOT / "aux" / "perf")!r})
        import turns
        sides = turns.Turns.from_env()
        stamps, lengths = array.array("d"), []
        sides.boundary()
        for _ in range({iterations}):
            if {gives_up}:
                sides.boundary()
            begun, start = time.monotonic(), time.process_time()
            while time.process_time() - start < {step_s}:
                stamps.append(time.monotonic())
            lengths.append(time.monotonic() - begun)
            sides.timed(begun, time.monotonic())
        with open({str(tmp_path / f"{name}.stamps")!r}, "wb") as f:
            stamps.tofile(f)
        run = {{"mean_s": sum(lengths) / len(lengths), "median_s": sorted(lengths)[len(lengths) // 2],
               "cpu_s": {step_s}}}
        print({as_run.PLAIN_LINE!r} + json.dumps(run), flush=True)
        sides.report()
        """))
    return [sys.executable, str(script)]


def stamps_of(path: Path) -> list[float]:
    import array
    a = array.array("d")
    a.frombytes(path.read_bytes())
    return list(a)


@pytest.mark.parametrize("first_first", [True, False])
def test_time_sliced_sides_never_run_at_once_and_give_up_their_turns_between_iterations(
        tmp_path, first_first):
    """Each side stamps the clock as fast as it can: had both run at once,
    on two cores their stamps would interleave thousands of times; taking
    turns, they change hands once a turn, and never inside an iteration of
    a side, unless the round says it stopped one there"""
    first = stamping(tmp_path, "first", 40, 0.01)
    second = stamping(tmp_path, "second", 40, 0.01)
    done = as_run.time_sliced(first, second, dict(os.environ), 0.1, first_first,
                              kinds=("plain", "plain"))
    a, b = done.runs
    # 0.4 s of CPU time cannot fit into one turn of 0.1 s (or two, stopped at the overrun)
    assert a.yields + a.forced >= 3 and b.yields + b.forced >= 3
    merged = sorted([(t, "first") for t in stamps_of(tmp_path / "first.stamps")]
                    + [(t, "second") for t in stamps_of(tmp_path / "second.stamps")])
    hands = [who for i, (_, who) in enumerate(merged) if i == 0 or merged[i - 1][1] != who]
    assert hands[0] == ("first" if first_first else "second")
    assert all(x != y for x, y in zip(hands, hands[1:]))
    assert len(hands) <= a.yields + b.yields + a.forced + b.forced + 2
    if not any("stopped inside" in reason for reason in done.refused):
        assert a.stopped_inside == b.stopped_inside == 0
    assert a.longest_s >= 0.01 and b.longest_s >= 0.01


def test_a_side_whose_iteration_outlasts_a_turn_is_refused(tmp_path):
    first = stamping(tmp_path, "first", 3, 0.15)
    second = stamping(tmp_path, "second", 20, 0.005)
    done = as_run.time_sliced(first, second, dict(os.environ), 0.05, True, kinds=("plain", "plain"))
    assert done.runs[0].longest_s >= 0.15
    assert any(reason.startswith("a timed iteration of the plain loop took") and
               reason.endswith("longer than a turn (0.05 s)") for reason in done.refused)


def test_a_side_stopped_inside_an_iteration_is_refused(tmp_path):
    """A side that never gives up its turn runs its iterations back to
    back: stopped at its overrun, the stop falls inside one of them"""
    first = stamping(tmp_path, "first", 30, 0.02, gives_up=False)
    second = stamping(tmp_path, "second", 30, 0.02)
    done = as_run.time_sliced(first, second, dict(os.environ), 0.1, True, kinds=("plain", "plain"))
    assert done.runs[0].forced >= 1 and done.runs[0].stopped_inside >= 1
    assert f"the plain loop was stopped inside {done.runs[0].stopped_inside} of its timed iterations " \
           f"(it overran its turn)" in done.refused


def test_the_driver_gives_up_its_turn_from_its_iteration_timer(tmp_path):
    """The driver's side runs through aux/perf/turns.py: its IterationTimer
    gives up the turn as an iteration starts, and its figures and turns
    are read from its lines"""
    plain = stamping(tmp_path, "plain", 20, 0.01)
    done = as_run.time_sliced([sys.executable, *DRIVER, "21", "0.01"], plain, dict(os.environ),
                              0.05, True)
    suite, _ = done.runs
    assert suite.yields + suite.forced >= 3 and suite.mean_s >= 0.01 and suite.cpu_s >= 0.01
    assert suite.longest_s >= suite.mean_s


def test_turns_account_for_every_timed_iteration_and_each_given_up_turn():
    sides = turns.Turns(None)
    sides.boundary()  # no turns: runs whole
    sides.timed(1.0, 1.5)
    found = json.loads(sides.line()[len(turns.TURNS_LINE):])
    assert found == {"yields": 0, "spans": [[1.0, 1.5]]}


def test_a_side_that_fails_before_its_loop_fails_the_round_and_the_other_is_killed(tmp_path):
    pid_file = tmp_path / "plain.pid"
    suite = tmp_path / "suite.py"
    # the driver fails once the plain loop, its process id written, waits at its first turn
    suite.write_text(textwrap.dedent(f"""\
        import os, sys, time
        for _ in range(6000):
            if os.path.exists({str(pid_file)!r}):
                break
            time.sleep(0.01)
        sys.exit(3)
        """))
    plain = tmp_path / "plain.py"
    plain.write_text(textwrap.dedent(f"""\
        import os, sys
        sys.path.insert(0, {str(ROOT / "aux" / "perf")!r})
        import turns
        open({str(pid_file) + '.new'!r}, "w").write(str(os.getpid()))
        os.replace({str(pid_file) + '.new'!r}, {str(pid_file)!r})
        turns.Turns.from_env().boundary()
        """))
    with pytest.raises(as_run.RunFailed, match="the plain loop ended with status 3"):
        as_run.time_sliced([sys.executable, str(suite)], [sys.executable, str(plain)],
                           dict(os.environ), 0.05, True, kinds=("plain", "plain"))
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_a_side_that_never_reaches_its_loop_is_named_at_the_deadline(tmp_path):
    suite = stamping(tmp_path, "suite", 1, 0.0)
    plain = tmp_path / "plain.py"
    plain.write_text("import signal\nsignal.pause()\n")
    with pytest.raises(as_run.RunFailed, match="the plain loop did not reach its loop within 1 s"):
        as_run.time_sliced(suite, [sys.executable, str(plain)], dict(os.environ), 0.05, True,
                           deadline_s=1, kinds=("plain", "plain"))


@pytest.mark.parametrize("device, given, slice_s", [
    ("cpu", None, 0.5), ("cuda", None, 0.0), ("cpu", 0.0, 0.0)])
def test_the_options_pick_time_sliced_turns_on_a_cpu_and_whole_runs_on_a_gpu(
        tmp_path, device, given, slice_s):
    p = argparse.ArgumentParser()
    as_run.add_arguments(p, warmup=1, iterations=7, slice_s=0.5)
    a = p.parse_args(["--as-run-rounds", "2"] + ([] if given is None else ["--as-run-slice", str(given)]))
    peer = plain_script(tmp_path, "peer", "[0.01] * 7")
    figures = as_run.compare(a, device, [*DRIVER, "8", "0.01"], peer, [], dict(os.environ))
    assert figures["slice_s"] == slice_s and figures["iterations"] == 7
    if figures["inconclusive"]:  # a host so busy that 10 ms outlasted a turn of 0.5 s
        assert slice_s > 0 and figures["refused"] >= 2
        return
    assert len(figures["ratio_wall"]) == 2 and figures["refused"] == len(figures["rounds"]) - 2
    assert ("time-sliced in turns of" in as_run.how(figures)) == (slice_s > 0)
    assert all(len(r["load"]["load_1min"]) == 2 for r in figures["rounds"])


def test_a_side_against_itself_reads_both_as_its_kind(tmp_path):
    """aux/perf/as_run_self.py's rounds: two plain loops, each read as one"""
    first = plain_script(tmp_path, "first", "[0.001] * 3")
    second = plain_script(tmp_path, "second", "[0.02] * 3")
    done = as_run.time_sliced([sys.executable, str(first)], [sys.executable, str(second)],
                              dict(os.environ), 0.5, False, kinds=("plain", "plain"))
    a, b = done.runs  # CPU time: what each burns, however busy the host
    assert a.cpu_s < 0.02 <= b.cpu_s


def test_each_side_starts_in_its_own_folder(tmp_path):
    """aux/perf/as_run_self.py --commits: each side's code from a tree of
    its own; here each side reads its figure from the folder it starts in"""
    folders = [tmp_path / "first_tree", tmp_path / "second_tree"]
    for folder, mean in zip(folders, ("0.2", "0.3")):
        folder.mkdir()
        (folder / "figure").write_text(f'{{"mean_s": {mean}, "median_s": 0.1, "cpu_s": 0.6}}')
    script = tmp_path / "reads_its_folder.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(ROOT / "aux" / "perf")!r})
        import turns
        sides = turns.Turns.from_env()
        sides.boundary()
        print({as_run.PLAIN_LINE!r} + open("figure").read(), flush=True)
        sides.report()
        """))
    cmd = [sys.executable, str(script)]
    done = as_run.time_sliced(cmd, cmd, dict(os.environ), 0.05, True, kinds=("plain", "plain"),
                              cwds=tuple(folders))
    assert (done.runs[0].mean_s, done.runs[1].mean_s) == (0.2, 0.3)
