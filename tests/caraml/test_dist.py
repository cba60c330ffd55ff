import gc
import weakref

import pytest
import torch
import torch.distributed as tdist

from caraml.node import dist
from tests.dist_fixtures import LAUNCHER_VARIABLES


def test_a_single_process_without_launcher_still_has_a_process_group(monkeypatch):
    # megatron-core's parallel state asserts that a group exists; a 1-GPU
    # run must take the same path as a multi-GPU one.
    for var in LAUNCHER_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    d = dist.init("cpu")
    try:
        assert (d.rank, d.world_size, d.local_rank, d.backend) == (0, 1, 0, "gloo")
        assert tdist.is_initialized() and tdist.get_world_size() == 1
        assert d.device == torch.device("cpu")
        assert d.any_rank(True) and not d.any_rank(False)
        assert d.gather_floats([1.5, 2.5]) == [[1.5, 2.5]]
        assert d.gather_objects("x") == ["x"]
    finally:
        d.close()
    assert not tdist.is_initialized()


def test_several_processes_without_a_meeting_address_is_a_clear_error(monkeypatch):
    for var in LAUNCHER_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(RuntimeError, match="2 processes but no MASTER_ADDR"):
        dist.init("cpu")
    assert not tdist.is_initialized()


def test_one_slurm_task_per_device_reads_slurm_variables(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLURM_PROCID", "5")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    monkeypatch.setenv("SLURM_NTASKS_PER_NODE", "4(x2)")
    assert dist._env_int("RANK", "SLURM_PROCID", default=0) == 5
    assert dist._env_int("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", default=1) == 4
    assert dist._env_int("NOT_SET_ANYWHERE", default=7) == 7


def test_cuda_requested_without_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="no GPU"):
        dist.init("cuda")


def test_close_frees_a_ddp_model_before_the_group_goes(monkeypatch):
    # A DDP model that only a reference cycle still holds (as its own hooks or
    # a caught exception's traceback can) must be gone when the group is
    # destroyed.
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29731")
    tdist.init_process_group("gloo", rank=0, world_size=1)
    d = dist.Dist(0, 1, 0, 1, torch.device("cpu"), "gloo")

    def train_briefly() -> weakref.ref:
        net = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
        net(torch.randn(2, 4)).sum().backward()
        cycle = [net]
        cycle.append(cycle)
        return weakref.ref(net)

    alive_at_destroy = []
    destroy = tdist.destroy_process_group
    monkeypatch.setattr(tdist, "destroy_process_group",
                        lambda: (alive_at_destroy.append(ddp() is not None), destroy()))
    gc.disable()
    try:
        ddp = train_briefly()
        assert ddp() is not None
        d.close()
    finally:
        gc.enable()
    assert alive_at_destroy == [False]
    assert not tdist.is_initialized()
