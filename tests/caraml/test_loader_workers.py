"""How many data-loader processes a rank gets (--num-workers auto): none
on a CPU device, else the rank's share of the cores less one for training,
at most AUTO_MOST; a number is taken as given."""

import os

import pytest

from caraml.node import loader_workers as lw


@pytest.fixture
def cores(monkeypatch):
    """This process's affinity as the test sets it, launchers' variables unset."""
    for var in ("LOCAL_WORLD_SIZE", "SLURM_STEP_ID", "SLURM_NTASKS_PER_NODE"):
        monkeypatch.delenv(var, raising=False)

    def given(n):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)))
    return given


def test_a_number_is_taken_as_given(cores):
    cores(1)
    assert lw.loader_workers(3, "cuda") == 3 and lw.loader_workers("0", "cpu") == 0


def test_on_a_cpu_device_auto_leaves_every_core_to_training(cores):
    cores(64)
    assert lw.loader_workers(lw.AUTO, "cpu") == 0


@pytest.mark.parametrize("n, workers", [(1, 0), (2, 1), (3, 2), (16, lw.AUTO_MOST)])
def test_beside_a_gpu_auto_keeps_one_core_for_training(cores, n, workers):
    cores(n)
    assert lw.loader_workers(lw.AUTO, "cuda") == workers


@pytest.mark.parametrize("under_srun", [False, True])
def test_ranks_torchrun_started_on_one_mask_share_its_cores(cores, monkeypatch, under_srun):
    """torchrun's ranks share its mask, also where srun started torchrun as
    the node's one task (the suite's torchrun launcher)."""
    cores(8)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    if under_srun:
        monkeypatch.setenv("SLURM_STEP_ID", "0")
    assert lw.cores_of_this_rank() == 2 and lw.loader_workers(lw.AUTO, "cuda") == 1


def test_a_task_srun_started_as_a_rank_has_its_cores_to_itself(cores, monkeypatch):
    cores(8)
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "4")  # srun binds each task to cores of its own
    assert lw.cores_of_this_rank() == 8
