"""Peak memory counts from the end of the warm-up: the summary's peaks are
the timed iterations' footprint, not cuDNN's algorithm search or a first
step's one-off buffers. On the CPU for real (the peak resident set, reset
through Linux's clear_refs); on a GPU torch's peak statistics, faked at the
device boundary."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import pytest
import torch

from caraml.node import driver, memory
from caraml.node.options import DriverOptions
from caraml.node.stopping import StopCondition

WARMUP_BYTES = 768 * 2**20


@dataclass(frozen=True, kw_only=True)
class Opts(DriverOptions):
    pass


def peak_allocated_gib(dist) -> float:
    return memory.peak(dist)["memory_max_allocated_gib"]


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK),
                    reason="the peak resident set cannot be reset on this host")
def test_a_warm_up_steps_memory_is_not_the_runs_peak(single_cpu):
    before = peak_allocated_gib(single_cpu)
    done = []

    def step():
        if not done:  # the one warm-up step touches a large buffer, then frees it
            torch.ones(WARMUP_BYTES // 4).sum()
        done.append(1)
        return 0.0

    opts = Opts(train_iters=3, warmup_iters=1, log_interval=1000, energy_methods=("none",))
    driver.train_loop(step, opts, single_cpu, StopCondition(max_iterations=3),
                      lambda rank: contextlib.nullcontext(), lambda *a: "progress")
    # without the reset the peak would be at least before + 0.75 GiB
    assert peak_allocated_gib(single_cpu) < before + 0.5 * WARMUP_BYTES / memory.GIB


def test_on_a_gpu_torchs_peak_statistics_are_reset(monkeypatch):
    reset = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset.append)
    memory.reset_peak(torch.device("cuda", 1))
    assert reset == [torch.device("cuda", 1)]
