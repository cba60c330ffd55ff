"""The GPU tests' fixture that fails them where torch cannot see the GPUs
nvidia-smi lists (tests/gpu_marks.py)."""

from tests.gpu_marks import torch_sees_the_listed_gpus  # noqa: F401
