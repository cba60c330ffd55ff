"""Samples/s (here images/s) from iteration times: per rank, and globally from the slowest
rank of each iteration."""

import pytest

from caraml.node import throughput
from caraml.node.timing import slowest_per_iteration, summarize


def overall(global_batch, by_rank):
    """The global line's figures as the driver core hands them over: from
    each iteration's slowest rank."""
    return throughput.overall("images", global_batch, summarize(slowest_per_iteration(by_rank)),
                              devices=len(by_rank))


def test_rank_figures_divide_the_batch_by_mean_and_median_time():
    figures = throughput.per_rank("images", 8, [1.0, 2.0, 3.0, 10.0])
    assert figures == pytest.approx({
        "images_per_s_mean": 8 / 4.0,
        "images_per_s_median": 8 / 2.5,
        "time_per_iteration_s": 4.0,
    })


def test_rate_comes_from_the_mean_time_not_from_averaged_rates():
    # 6 images in 1 s and in 3 s: 12 images in 4 s is 3 images/s; the mean of
    # the two rates (6 and 2) would claim 4.
    assert throughput.per_rank("images", 6, [1.0, 3.0])["images_per_s_mean"] == pytest.approx(3.0)


def test_global_time_is_the_slowest_rank_per_iteration():
    by_rank = [[1.0, 4.0, 2.0], [3.0, 1.0, 2.5]]
    figures = overall(12, by_rank)
    assert figures == pytest.approx({
        "time_per_iteration_s": 9.5 / 3,
        "time_per_iteration_median_s": 3.0,
        "images_per_s_mean": 12 / (9.5 / 3),
        "images_per_s_median": 12 / 3.0,
        "images_per_s_per_device": 12 / (9.5 / 3) / 2,
    })


def test_global_figure_never_exceeds_the_sum_of_rank_figures():
    by_rank = [[1.0, 4.0, 2.0], [3.0, 1.0, 2.5]]
    rank_sum = sum(throughput.per_rank("images", 6, d)["images_per_s_mean"] for d in by_rank)
    assert overall(12, by_rank)["images_per_s_mean"] <= rank_sum


def test_single_rank_global_equals_rank_figures():
    durations = [0.5, 0.7, 0.6]
    rank = throughput.per_rank("images", 16, durations)
    job = overall(16, [durations])
    assert job["images_per_s_mean"] == rank["images_per_s_mean"]
    assert job["images_per_s_per_device"] == rank["images_per_s_mean"]
    assert job["time_per_iteration_s"] == rank["time_per_iteration_s"]


def test_ranks_with_different_iteration_counts_are_an_error():
    with pytest.raises(ValueError):
        overall(8, [[1.0, 2.0], [1.0]])


def test_the_unit_names_the_figures():
    assert set(throughput.per_rank("samples", 4, [1.0])) == {
        "samples_per_s_mean", "samples_per_s_median", "time_per_iteration_s"}
