"""Both drivers on a real GPU, as the job scripts start them: the megatron
backend on one GPU with the driver's own process group, the torch backend,
and the image benchmark in fp16 (gradient scaler), bf16 and channels_last.
Selected with `-m gpu`; skipped where torch sees no GPU."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from tests.driver_runs import parse_caraml
from tests.gpu_marks import requires_gpu

pytestmark = requires_gpu


def driver(module: str, *flags: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", module, "--device", "cuda",
                           "--energy-methods", "none", *flags],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return parse_caraml(proc.stdout)["global"]


def check_llm(line: dict, backend: str, precision: str) -> None:
    assert (line["backend"], line["precision"], line["devices"]) == (backend, precision, "1")
    assert int(line["iterations"]) == 3
    assert float(line["tokens_per_s"]) > 0
    assert line["peak_source"] in ("datasheet", "measured-matmul")
    assert 0 < float(line["mfu"]) < 1
    assert 0 < float(line["memory_max_allocated_gib"]) <= float(line["memory_max_reserved_gib"]) \
        <= float(line["memory_device_gib"])


LLM_800M_SHORT = ["--model-size", "800M", "--synthetic", "--global-batch-size", "8",
                  "--micro-batch-size", "4", "--train-iters", "4", "--warmup-iters", "1",
                  "--num-workers", "0", "--peak-tflops", "auto"]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_megatron_backend_trains_800m_on_one_gpu_without_a_caller_made_group(precision):
    check_llm(driver("llm_training.pretrain_gpt", "--backend", "megatron",
                     "--precision", precision, *LLM_800M_SHORT), "megatron", precision)


def test_torch_backend_trains_800m_on_one_gpu():
    check_llm(driver("llm_training.pretrain_gpt", "--backend", "torch", "--precision", "bf16",
                     *LLM_800M_SHORT), "torch", "bf16")


@pytest.mark.parametrize("precision", ["fp16", "bf16", "tf32", "fp32"])
def test_image_benchmark_trains_resnet50_channels_last(precision):
    line = driver("image_classification.image_classification_torch", "--model", "resnet50",
                  "--image-size", "224", "--global-batch-size", "32", "--precision", precision,
                  "--channels-last", "--train-iters", "4", "--warmup-iters", "1")
    assert (line["model"], line["precision"], line["devices"]) == ("resnet50", precision, "1")
    assert float(line["images_per_s_mean"]) > 0
    assert float(line["memory_max_allocated_gib"]) > 0


# ResNet-50 training keeps well over 50 MB of fp32 activations per 224x224
# image; three times the device's memory in activations cannot fit. The
# synthetic pool of such a batch stays within the host's share
# (tests/gpu/test_synthetic_pool_host_memory.py checks it for 80 to 192 GB
# devices on a 128 GiB host), so the device, not the host, runs out.
OOM_IMAGE_SIZE = 224
OOM_ACTIVATION_BYTES_PER_IMAGE = 50e6


def oom_batch(device_bytes: int) -> int:
    return 256 * math.ceil(3 * device_bytes / OOM_ACTIVATION_BYTES_PER_IMAGE / 256)


def test_out_of_memory_is_a_one_line_error_that_says_what_to_lower():
    import torch

    batch = oom_batch(torch.cuda.get_device_properties(0).total_memory)
    proc = subprocess.run([sys.executable, "-m", "image_classification.image_classification_torch",
                           "--device", "cuda", "--energy-methods", "none", "--model", "resnet50",
                           "--image-size", str(OOM_IMAGE_SIZE), "--global-batch-size", str(batch),
                           "--train-iters", "2", "--warmup-iters", "1"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("CARAML ERROR:")]
    assert errors and f"out of memory at {batch} samples per device on cuda of" in errors[0]
    assert "lower the global batch size" in errors[0]
