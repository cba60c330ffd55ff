import os
import signal

import pytest

from caraml.node.stopping import StopCondition


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
