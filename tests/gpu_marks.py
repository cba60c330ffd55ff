"""The mark of tests that need a GPU: selected with `-m gpu`
(`bash aux/run_tests.sh -m gpu` on a GPU node), skipped with the reason
where torch sees none."""

import pytest
import torch

requires_gpu = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs a CUDA or ROCm GPU and torch sees none here; "
                              "run on a GPU node: bash aux/run_tests.sh -m gpu"),
]

# Where a test runs a driver: the GPU when there is one, so the tests exercise
# the path a user's figure comes from.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
