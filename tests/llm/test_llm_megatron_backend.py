"""The megatron backend built the way the driver builds it: the process
group from caraml.node.dist.init (none made by the test), megatron-core's
parallel state carved out of it, the model on the run's device. A CPU
builds the model but cannot train it (megatron-core's DDP keeps its buffers
on the GPU); tests/gpu trains it."""

import pytest
import torch
from llm_helpers import TINY

pytest.importorskip("megatron.core")
from megatron.core import parallel_state

from caraml.report import BenchmarkInputError
from llm_training import arguments, pretrain_gpt
from llm_training.flops import parameter_count


def test_builds_on_one_process_through_the_drivers_own_set_up(single_cpu):
    args = arguments.parse([*TINY, "--backend", "megatron", "--train-iters", "2",
                            "--energy-methods", "none"])
    layout = arguments.resolve_layout(args, single_cpu.world_size)
    gpt = arguments.gpt_config(args, args.vocab_size)
    try:
        backend = pretrain_gpt.build_backend(gpt, args, layout, single_cpu)
        assert backend.name == "megatron"
        assert parallel_state.model_parallel_is_initialized()
        assert parallel_state.get_data_parallel_world_size() == 1
        assert backend.data_parallel_rank == 0
        params = list(backend.model.parameters())
        assert sum(p.numel() for p in params) == parameter_count(gpt)
        assert {p.device for p in params} == {torch.device("cpu")}
        with pytest.raises(BenchmarkInputError, match="trains on CUDA or ROCm GPUs only"):
            backend.train_step(iter([]))
    finally:
        parallel_state.destroy_model_parallel()
