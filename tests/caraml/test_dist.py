import pytest
import torch

from caraml import dist


def test_single_process_without_launcher(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID",
                "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"):
        monkeypatch.delenv(var, raising=False)
    d = dist.init("cpu")
    assert (d.rank, d.world_size, d.local_rank, d.backend) == (0, 1, 0, None)
    assert d.device == torch.device("cpu")
    assert d.any_rank(True) and not d.any_rank(False)
    assert d.gather_floats([1.5, 2.5]) == [[1.5, 2.5]]


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
