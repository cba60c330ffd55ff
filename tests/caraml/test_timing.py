import pytest

from caraml.node.timing import IterationTimer, Timed, rate, slowest_per_iteration, summarize


class FakeClock:
    def __init__(self, ticks):
        self.ticks = list(ticks)

    def __call__(self):
        return self.ticks.pop(0)


def test_warmup_iterations_are_run_but_not_recorded():
    # start/stop pairs: 1 s, 5 s (warm-up), then 2 s, 4 s
    clock = FakeClock([0, 1, 1, 6, 6, 8, 8, 12])
    timer = IterationTimer(warmup=2, clock=clock)
    for _ in range(4):
        timer.start()
        timer.stop()
    assert timer.seen == 4
    assert timer.durations == [2, 4]
    stats = summarize(timer.durations)
    assert (stats.iterations, stats.mean_s, stats.median_s) == (2, 3.0, 3.0)


def test_device_is_synchronised_before_every_timer_read():
    events = []
    clock_values = iter(range(100))
    timer = IterationTimer(warmup=0, sync=lambda: events.append("sync"),
                           clock=lambda: events.append("read") or next(clock_values))
    timer.start()
    timer.stop()
    assert events == ["sync", "read", "sync", "read"]


def test_stop_without_start_and_negative_warmup_are_rejected():
    with pytest.raises(RuntimeError):
        IterationTimer(warmup=0).stop()
    with pytest.raises(ValueError):
        IterationTimer(warmup=-1)


def test_rate():
    assert rate(512 * 2048, 2.0) == 524288
    with pytest.raises(ValueError):
        rate(1, 0)


def test_the_job_takes_as_long_as_its_slowest_rank_in_each_iteration():
    by_rank = [[1.0, 4.0, 2.0], [3.0, 1.0, 2.5]]
    assert slowest_per_iteration(by_rank) == [3.0, 4.0, 2.5]
    # (the slowest rank's mean, 8/3 and 7.5/3, would claim a faster job)
    assert summarize(slowest_per_iteration(by_rank)).mean_s == pytest.approx(9.5 / 3)
    with pytest.raises(ValueError):
        slowest_per_iteration([[1.0, 2.0], [1.0]])


def test_so_far_counts_the_running_iteration_once_it_is_timed():
    now = [0.0]
    timer = IterationTimer(warmup=1, clock=lambda: now[0])
    timer.start()
    now[0] = 1.0
    assert timer.so_far() == Timed(0, 0.0)  # the warm-up's iteration is never timed
    timer.stop()
    timer.start()
    now[0] = 1.5
    assert timer.so_far() == Timed(1, 0.5)  # the running iteration, as long as it has run
    now[0] = 3.0
    timer.stop()
    assert timer.so_far() == Timed(1, 2.0)


def test_so_far_is_the_durations_count_and_sum_without_going_over_them_again():
    ticks = iter(range(100))
    timer = IterationTimer(warmup=2, clock=lambda: 0.1 * next(ticks) ** 2)
    for _ in range(12):
        timer.start()
        timer.stop()
    assert timer.so_far() == Timed(10, sum(timer.durations))


def test_the_spread_of_the_iteration_times_is_p10_p50_p90():
    # inclusive deciles: within the iterations' range, linear between them
    stats = summarize([float(t) for t in range(1, 12)])  # 1 .. 11 s
    assert stats.spread() == {"time_per_iteration_p10_s": 2.0, "time_per_iteration_p50_s": 6.0,
                              "time_per_iteration_p90_s": 10.0}
    assert summarize([3.0]).spread() == {"time_per_iteration_p10_s": 3.0,
                                         "time_per_iteration_p50_s": 3.0,
                                         "time_per_iteration_p90_s": 3.0}
