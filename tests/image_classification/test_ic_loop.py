"""The timed loop, on a fake clock: warm-up left out, the batch fetch timed,
and every way of stopping."""

import itertools
import os
import signal

import pytest
import torch

from caraml.stopping import StopCondition
from caraml.timing import IterationTimer
from image_classification import train

BATCH = 4


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def steps_taking(clock, seconds):
    """A step that takes seconds[i] on the fake clock and returns i as loss."""
    calls = itertools.count()

    def step(images, labels):
        i = next(calls)
        clock.now += seconds[i]
        return torch.tensor(float(i))

    return step


def constant_batches():
    return itertools.repeat((torch.zeros(BATCH, 3), torch.zeros(BATCH)))


def run(step, clock, dist, stop, warmup=2, batches=None, log_interval=1000):
    timer = IterationTimer(warmup, clock=clock)
    return train.run(step, batches or constant_batches(), timer, stop, dist,
                     total_iterations=stop.max_iterations, log_interval=log_interval)


def test_warmup_iterations_are_run_but_not_timed(single_cpu):
    clock = FakeClock()
    result = run(steps_taking(clock, [5.0, 4.0, 1.0, 2.0, 3.0]), clock, single_cpu,
                 StopCondition(max_iterations=5, clock=clock), warmup=2)
    assert result.iterations == 5
    assert result.durations == [1.0, 2.0, 3.0]
    assert result.loss == 4.0
    assert result.stop_reason == "iteration count 5 reached"


def test_fetching_the_batch_is_part_of_the_timed_step(single_cpu):
    clock = FakeClock()

    def slow_copies():
        for batch in constant_batches():
            clock.now += 0.5  # the host-to-device copy
            yield batch

    result = run(steps_taking(clock, [1.0] * 3), clock, single_cpu,
                 StopCondition(max_iterations=3, clock=clock), warmup=0,
                 batches=slow_copies())
    assert result.durations == [1.5, 1.5, 1.5]


def test_a_signal_stops_the_loop_after_the_running_iteration(single_cpu):
    clock = FakeClock()
    step = steps_taking(clock, [1.0] * 100)

    def signalled_in_third(images, labels):
        loss = step(images, labels)
        if loss.item() == 2:
            os.kill(os.getpid(), signal.SIGUSR1)
        return loss

    with StopCondition(max_iterations=100, clock=clock) as stop:
        result = run(signalled_in_third, clock, single_cpu, stop, warmup=1)
    assert result.iterations == 3
    assert result.durations == [1.0, 1.0]
    assert result.stop_reason == "signal SIGUSR1"


def test_the_wall_clock_budget_stops_the_loop(single_cpu):
    clock = FakeClock()
    stop = StopCondition(max_iterations=100, max_seconds=10.0, clock=clock)
    result = run(steps_taking(clock, [4.0] * 100), clock, single_cpu, stop, warmup=1)
    assert result.iterations == 3  # 12 s >= 10 s after the third
    assert result.stop_reason == "wall-clock budget 10 s reached"


class OtherRankStopsAfter:
    """A rank 0 whose peer wants to stop after `iterations` iterations."""

    is_main = True

    def __init__(self, iterations):
        self.iterations = iterations
        self.checks = 0

    def any_rank(self, flag):
        self.checks += 1
        return flag or self.checks > self.iterations


def test_all_ranks_stop_when_one_must(single_cpu):
    clock = FakeClock()
    result = run(steps_taking(clock, [1.0] * 100), clock, OtherRankStopsAfter(4),
                 StopCondition(max_iterations=100, clock=clock), warmup=1)
    assert result.iterations == 4
    assert result.durations == [1.0, 1.0, 1.0]
    assert result.stop_reason is None  # it had no reason of its own


@pytest.mark.parametrize("reasons, text", [
    (["signal SIGTERM", "signal SIGTERM"], "signal SIGTERM"),
    (["iteration count 5 reached"], "iteration count 5 reached"),
    ([None, None, "signal SIGUSR1", "wall-clock budget 60 s reached"],
     "signal SIGUSR1 on rank 2"),
])
def test_the_stop_reason_is_rank_0s_or_that_of_the_rank_that_stopped_first(reasons, text):
    assert train.stop_reason(reasons) == text


def test_stopped_before_the_first_iteration(single_cpu):
    clock = FakeClock()
    stop = StopCondition(max_iterations=5, clock=clock)
    stop.signal_received = "SIGTERM"
    result = run(steps_taking(clock, [1.0] * 5), clock, single_cpu, stop)
    assert (result.iterations, result.durations, result.loss) == (0, [], None)
    assert result.stop_reason == "signal SIGTERM"


def test_progress_lines_mark_warmup_and_give_this_ranks_rate(single_cpu, capsys):
    clock = FakeClock()
    run(steps_taking(clock, [5.0, 4.0, 1.0, 2.0, 3.0]), clock, single_cpu,
        StopCondition(max_iterations=5, clock=clock), warmup=2, log_interval=2)
    assert capsys.readouterr().out.splitlines() == [
        "iteration 2/5 (warm-up): loss 1.0000, 4.000 s, 1.0 images/s on rank 0",
        "iteration 4/5: loss 3.0000, 2.000 s, 2.0 images/s on rank 0",
    ]


@pytest.mark.parametrize("precision_name", ["fp32", "bf16"])
def test_sgd_step_updates_the_weights_and_returns_the_loss(precision_name):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    before = net[1].weight.detach().clone()
    step = train.sgd_step(net, torch.optim.SGD(net.parameters(), lr=0.1), precision_name,
                          torch.device("cpu"))
    images, labels = torch.randn(4, 3, 2, 2), torch.tensor([0, 1, 2, 0])
    loss = step(images, labels)
    expected = torch.nn.functional.cross_entropy(net(images), labels)  # after the update
    assert loss.dim() == 0 and torch.isfinite(loss) and not loss.requires_grad
    assert not torch.equal(before, net[1].weight)
    assert expected.item() < loss.item()
