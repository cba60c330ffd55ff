import os
import signal

import pytest

from caraml.node.stopping import StopCondition
from caraml.node.timing import Timed


def test_iteration_count():
    stop = StopCondition(max_iterations=3)
    assert stop.reason(2) is None
    assert "iteration count 3" in stop.reason(3)


def test_wall_clock_budget():
    now = [100.0]
    stop = StopCondition(max_seconds=60, clock=lambda: now[0])
    assert stop.reason(1) is None
    now[0] = 159.9
    assert stop.reason(1) is None
    now[0] = 160.0
    assert "wall-clock budget 60 s" in stop.reason(1)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2])
def test_slurm_signals_stop_the_run_instead_of_killing_it(sig):
    with StopCondition(max_iterations=1000) as stop:
        os.kill(os.getpid(), sig)
        assert stop.reason(5) == f"signal {signal.Signals(sig).name}"
    # the previous handler is back once the run is over
    assert signal.getsignal(sig) is not stop._on_signal


def test_bad_limits_are_rejected():
    with pytest.raises(ValueError):
        StopCondition(max_iterations=0)
    with pytest.raises(ValueError):
        StopCondition(max_seconds=-1)


def test_a_measurement_window_makes_the_iteration_count_a_floor():
    """The run goes on past its iterations until it has timed at least so
    many lasting at least so long: a row long enough to be a measurement."""
    stop = StopCondition(max_iterations=4, min_timed_iterations=3, min_timed_seconds=2.0)
    assert stop.reason(4, Timed(2, 1.0)) is None  # two timed iterations: too few
    assert stop.reason(6, Timed(4, 1.9)) is None  # four, 1.9 s: too short
    window = "measurement window reached: at least 3 timed iterations lasting 2 s"
    assert stop.reason(7, Timed(4, 2.0)) == window
    # a long run reaches the window before its count: the count ends it
    assert stop.reason(3, Timed(3, 15.0)) is None
    assert stop.reason(4, Timed(3, 15.0)) == window
    with pytest.raises(ValueError):
        StopCondition(max_iterations=4, min_timed_seconds=0)
