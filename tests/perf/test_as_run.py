"""aux/perf/as_run.py, the peer scripts' as-run comparison, with real
processes in place of the drivers and the plain loops (each a few lines of
Python without torch): the driver's figures read from its summary line, the
plain loop's from its line, the sides by turns, and the ratios. It measures
nothing: every figure here is given."""

from __future__ import annotations

import argparse
import array
import math
import os
import statistics
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "aux" / "perf"))

import as_run


def test_the_drivers_figures_come_from_its_last_summary_line(tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent("""\
        print("CARAML global: time_per_iteration_median_s=9 cpu_s_per_iteration=9")
        print("CARAML global: time_per_iteration_median_s=0.25 cpu_s_per_iteration=0.5 loss=3")
        """))
    assert as_run.suite_run([str(driver), "x"], {}) == as_run.Run(0.25, 0.5)


@pytest.mark.parametrize("printed, says", [
    ("CARAML global: time_per_iteration_median_s=- cpu_s_per_iteration=-", "no timed figure"),
    ("import sys; sys.exit(3)", "ended with status 3"),
])
def test_a_driver_without_a_figure_fails_the_comparison_with_one_line(tmp_path, printed, says):
    driver = tmp_path / "driver.py"
    driver.write_text(printed if printed.startswith("import") else f"print({printed!r})\n")
    with pytest.raises(as_run.RunFailed, match=says):
        as_run.suite_run([str(driver), "x"], {})


def test_the_plain_loop_times_its_iterations_in_a_process_of_its_own(tmp_path):
    """time_plain in the child prints what plain_run reads back."""
    script = tmp_path / "peer.py"
    script.write_text(textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(Path(as_run.__file__).parent)!r})
        import as_run
        assert sys.argv[1:] == ["--plain", "--size", "3"]
        steps = []
        as_run.time_plain(lambda: steps.append(1), warmup=2, iterations=5, sync=lambda: None)
        assert len(steps) == 7
        """))
    run = as_run.plain_run(script, ["--size", "3"], {})
    assert run.median_s >= 0 and run.cpu_s >= 0


def test_the_sides_take_turns_and_the_ratio_is_the_plain_loops_time_over_the_suites():
    order, said = [], []
    suite = iter([as_run.Run(1.0, 2.0), as_run.Run(2.0, 2.0), as_run.Run(1.0, 1.0)])
    plain = iter([as_run.Run(0.9, 1.0), as_run.Run(2.2, 3.0), as_run.Run(1.0, 1.0)])
    runs = as_run.interleaved(3, as_run.by_turns(lambda: order.append("suite") or next(suite),
                                                 lambda: order.append("plain") or next(plain)),
                              say=said.append)
    assert order == ["suite", "plain", "plain", "suite", "suite", "plain"]
    assert len(said) == 3
    s = as_run.summary(runs)
    assert s["ratio_wall"] == pytest.approx([0.9, 1.1, 1.0])
    assert s["ratio_wall_median"] == pytest.approx(1.0) and s["ratio_wall_best"] == pytest.approx(1.1)
    assert s["ratio_cpu"] == pytest.approx([0.5, 1.5, 1.0]) and s["ratio_cpu_median"] == pytest.approx(1.0)
    # the fastest runs: the plain loop's 0.9 s over the suite's 1.0 s
    assert s["ratio_wall_fastest"] == pytest.approx(0.9)
    assert as_run.row("driver", s)[:7] == ["driver", "1.0000", "1.0000", "1.000x",
                                           "0.900-1.100", "1.100x", "0.900x"]


def test_the_medians_interval_draws_whole_rounds_and_is_the_same_every_time():
    rounds = [0.95, 1.02, 0.99, 1.01, 0.97, 1.00, 0.98, 1.03, 0.96, 1.01, 0.99]
    low, high = as_run.median_interval(rounds)
    assert min(rounds) < low < statistics.median(rounds) < high < max(rounds)
    assert as_run.median_interval(rounds) == (low, high)
    # rounds that agree leave no doubt; one round leaves no interval
    assert as_run.median_interval([1.01] * 5) == pytest.approx((1.01, 1.01))
    assert all(math.isnan(v) for v in as_run.median_interval([1.0]))


SUITE_FIGURE = "CARAML global: time_per_iteration_median_s=0.25 cpu_s_per_iteration=0.5"
PLAIN_FIGURE = as_run.PLAIN_LINE + '{"median_s": 0.2, "cpu_s": 0.4}'


def side(tmp_path: Path, name: str, ready: str, figure: str, body: str, before: str = "") -> list[str]:
    """A side's command: a process that runs `before`, prints `ready`,
    runs `body` and prints `figure`. It holds SIGCONT from the start, so
    that a turn's SIGCONT stays for sigwait even where the pause came
    before the sigwait."""
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent("""\
        import array, os, signal, sys, time
        out = sys.argv[1]
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCONT])
        {before}
        print({ready!r}, flush=True)
        {body}
        print({figure!r}, flush=True)
        """).format(ready=ready, figure=figure, body=body, before=before))
    return [sys.executable, str(script), str(tmp_path / f"{name}.out")]


# waits for its first turn, then stamps the clock while it burns 0.3 s of
# CPU time
TAKES_TURNS = """\
signal.sigwait([signal.SIGCONT])
stamps, start = array.array("d"), time.process_time()
while time.process_time() - start < 0.3:
    stamps.append(time.monotonic()); sum(range(200))
with open(out, "wb") as f: stamps.tofile(f)"""


def stamps(path: Path) -> array.array:
    a = array.array("d")
    a.frombytes(path.read_bytes())
    return a


@pytest.mark.parametrize("suite_first", [True, False])
def test_time_sliced_sides_never_run_at_once_and_take_turns(tmp_path, suite_first):
    """Each side stamps the clock as fast as it can: had both run at once,
    on two cores their stamps would interleave thousands of times; taking
    turns, they change hands once a turn."""
    suite = side(tmp_path, "suite", as_run.SUITE_READY + " host=x", SUITE_FIGURE, TAKES_TURNS)
    plain = side(tmp_path, "plain", as_run.PLAIN_READY, PLAIN_FIGURE, TAKES_TURNS)
    s, p = as_run.time_sliced(suite, plain, dict(os.environ), 0.05, suite_first)
    assert (s.median_s, s.cpu_s, p.median_s, p.cpu_s) == (0.25, 0.5, 0.2, 0.4)
    # 0.3 s of CPU time cannot fit into two turns of 0.05 s
    assert s.pauses >= 2 and p.pauses >= 2
    merged = sorted([(t, "suite") for t in stamps(tmp_path / "suite.out")]
                    + [(t, "plain") for t in stamps(tmp_path / "plain.out")])
    hands = [who for i, (_, who) in enumerate(merged) if i == 0 or merged[i - 1][1] != who]
    assert hands[0] == ("suite" if suite_first else "plain")
    assert all(a != b for a, b in zip(hands, hands[1:]))
    assert len(hands) <= s.pauses + p.pauses + 2


def test_a_side_that_fails_before_its_loop_fails_the_round_and_the_other_is_killed(tmp_path):
    pid_file = tmp_path / "plain.pid"
    # the driver fails once the plain loop, its process id written, waits in its loop
    suite = side(tmp_path, "suite", "starting", SUITE_FIGURE, "sys.exit(3)", before=(
        f"for _ in range(6000):\n    if os.path.exists({str(pid_file)!r}): break\n"
        f"    time.sleep(0.01)"))
    plain = side(tmp_path, "plain", as_run.PLAIN_READY, PLAIN_FIGURE, "signal.pause()", before=(
        f"open({str(pid_file) + '.new'!r}, 'w').write(str(os.getpid())); "
        f"os.replace({str(pid_file) + '.new'!r}, {str(pid_file)!r})"))
    with pytest.raises(as_run.RunFailed, match="the driver .* ended with status 3"):
        as_run.time_sliced(suite, plain, dict(os.environ), 0.05, True)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_a_side_that_never_reaches_its_loop_is_named_at_the_deadline(tmp_path):
    suite = side(tmp_path, "suite", as_run.SUITE_READY, SUITE_FIGURE, "pass")
    plain = side(tmp_path, "plain", "setting up", PLAIN_FIGURE, "signal.pause()")
    with pytest.raises(as_run.RunFailed, match="the plain loop did not reach its loop within 1 s"):
        as_run.time_sliced(suite, plain, dict(os.environ), 0.05, True, deadline_s=1)


@pytest.mark.parametrize("device, given, slice_s", [
    ("cpu", None, 0.5), ("cuda", None, 0.0), ("cuda", 2.0, 2.0), ("cpu", 0.0, 0.0)])
def test_the_options_pick_time_sliced_turns_on_a_cpu_and_whole_runs_on_a_gpu(
        tmp_path, device, given, slice_s):
    p = argparse.ArgumentParser()
    as_run.add_arguments(p, warmup=1, iterations=7, slice_s=0.5)
    a = p.parse_args(["--as-run-rounds", "2"] + ([] if given is None else ["--as-run-slice", str(given)]))
    driver = side(tmp_path, "driver", as_run.SUITE_READY, SUITE_FIGURE, "pass")
    plain = tmp_path / "peer.py"
    plain.write_text(f"print({as_run.PLAIN_READY!r}); print({PLAIN_FIGURE!r})\n")
    figures = as_run.compare(a, device, driver[1:], plain, [], dict(os.environ))
    assert figures["slice_s"] == slice_s and figures["iterations"] == 7
    assert figures["ratio_wall"] == pytest.approx([0.8, 0.8])
    assert ("time-sliced in turns of" in as_run.how(figures)) == (slice_s > 0)


def test_a_side_against_itself_reads_both_as_its_kind(tmp_path):
    """aux/perf/as_run_self.py's rounds: two plain loops, each read as one"""
    first = side(tmp_path, "first", as_run.PLAIN_READY, PLAIN_FIGURE, "signal.sigwait([signal.SIGCONT])")
    second = side(tmp_path, "second", as_run.PLAIN_READY,
                  as_run.PLAIN_LINE + '{"median_s": 0.3, "cpu_s": 0.6}', "signal.sigwait([signal.SIGCONT])")
    a, b = as_run.time_sliced(first, second, dict(os.environ), 0.05, False, kinds=("plain", "plain"))
    assert (a.median_s, b.median_s) == (0.2, 0.3)


def test_each_side_starts_in_its_own_folder(tmp_path):
    """aux/perf/as_run_self.py --commits: each side's code from a tree of
    its own; here each side reads its figure from the folder it starts in"""
    folders = [tmp_path / "first_tree", tmp_path / "second_tree"]
    for folder, median in zip(folders, ("0.2", "0.3")):
        folder.mkdir()
        (folder / "figure").write_text(f'{{"median_s": {median}, "cpu_s": 0.6}}')
    reads_its_folder = ("signal.sigwait([signal.SIGCONT])\n"
                        f"print({as_run.PLAIN_LINE!r} + open('figure').read(), flush=True)")
    first, second = (side(tmp_path, name, as_run.PLAIN_READY, "", reads_its_folder)
                     for name in ("first", "second"))
    a, b = as_run.time_sliced(first, second, dict(os.environ), 0.05, True,
                              kinds=("plain", "plain"), cwds=tuple(folders))
    assert (a.median_s, b.median_s) == (0.2, 0.3)
