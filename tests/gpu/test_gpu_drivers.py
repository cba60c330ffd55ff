"""Both drivers on a real GPU, as the job scripts start them: the megatron
backend on one GPU with the driver's own process group, the torch backend,
and the image benchmark in fp16 (gradient scaler), bf16 and channels_last;
the two LLM backends' loss on the same data and seed; data, tensor and
pipeline parallelism on two GPUs (where the node has them); the memory
plan's micro-batch on the real device; out of memory as one line.
Selected with `-m gpu`; skipped where the host has no GPU, failed where
the host lists GPUs that torch does not see (tests/gpu_marks.py)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import pytest

from caraml import rocm_tf32
from tests.driver_runs import parse_caraml
from tests.gpu_marks import requires_gpu

pytestmark = requires_gpu


def run_driver(module: str, *flags: str, gpus: int = 1) -> subprocess.CompletedProcess:
    """The driver on `gpus` GPUs of this node: one process, or torchrun's,
    with the environment the job script gives its precision (ROCm's TF32)."""
    import torch

    launcher = ([sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc-per-node", str(gpus)] if gpus > 1 else [sys.executable])
    asked = flags[flags.index("--precision") + 1] if "--precision" in flags else ""
    kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    proc = subprocess.run([*launcher, "-m", module, "--device", "cuda",
                           "--energy-methods", "none", *flags],
                          env={**os.environ, **rocm_tf32.exports(kind, asked)},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def driver(module: str, *flags: str, gpus: int = 1) -> dict:
    return parse_caraml(run_driver(module, *flags, gpus=gpus).stdout)["global"]


def check_llm(line: dict, backend: str, precision: str) -> None:
    assert (line["backend"], line["precision"], line["devices"]) == (backend, precision, "1")
    assert int(line["iterations"]) == 3
    assert float(line["tokens_per_s"]) > 0
    assert line["peak_basis"] in ("datasheet", "measured-matmul")
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


# The first iteration's loss, before any update: an untrained GPT predicts
# about uniformly, so both backends report about ln(vocabulary) (10.83 for
# the padded GPT-2 vocabulary of 50,304), over 4 micro-batches of 2.
FIRST_LOSS = ["--model-size", "800M", "--synthetic", "--global-batch-size", "8",
              "--micro-batch-size", "2", "--train-iters", "1", "--warmup-iters", "0",
              "--log-interval", "1", "--seed", "1234", "--num-workers", "0",
              "--precision", "bf16"]


def test_both_backends_report_the_same_loss_on_the_same_data_and_seed():
    losses = {backend: float(driver("llm_training.pretrain_gpt", "--backend", backend,
                                    *FIRST_LOSS)["loss"])
              for backend in ("megatron", "torch")}
    assert losses["megatron"] == pytest.approx(math.log(50304), abs=0.3), losses
    assert losses["megatron"] == pytest.approx(losses["torch"], rel=0.02), losses


LAYOUTS_ON_TWO_GPUS = {
    "data parallel (megatron)": ("megatron", [], (1, 1, 2)),
    "data parallel (torch DDP)": ("torch", [], (1, 1, 2)),
    "tensor parallel": ("megatron", ["--tensor-model-parallel-size", "2",
                                     "--no-sequence-parallel"], (2, 1, 1)),
    "pipeline parallel": ("megatron", ["--pipeline-model-parallel-size", "2"], (1, 2, 1)),
}


@pytest.mark.parametrize("layout", LAYOUTS_ON_TWO_GPUS)
def test_two_gpu_layouts_train_and_agree_on_the_loss(layout):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs on one node; this node has {torch.cuda.device_count()}")
    backend, flags, (tp, pp, dp) = LAYOUTS_ON_TWO_GPUS[layout]
    line = driver("llm_training.pretrain_gpt", "--backend", backend, *FIRST_LOSS, *flags, gpus=2)
    assert (int(line["tp"]), int(line["pp"]), int(line["dp"])) == (tp, pp, dp)
    assert line["devices"] == "2"
    assert float(line["loss"]) == pytest.approx(math.log(50304), abs=0.3)


def test_auto_micro_batch_fits_the_device_and_the_plan_is_close():
    """The plan picks the micro-batch from this GPU's memory; the run must
    fit, and its measured peak (timed iterations) lie near the estimate."""
    proc = run_driver("llm_training.pretrain_gpt", "--backend", "megatron", "--precision", "bf16",
                      "--model-size", "800M", "--synthetic", "--global-batch-size", "64",
                      "--micro-batch-size", "auto", "--recompute-activations", "auto",
                      "--train-iters", "3", "--warmup-iters", "1", "--num-workers", "0")
    plan = re.search(r"memory plan: recompute (\S+), micro-batch (\d+): about ([\d.]+) GiB of "
                     r"([\d.]+) GiB usable", proc.stdout)
    assert plan, proc.stdout[-3000:]
    estimate, usable = float(plan[3]), float(plan[4])
    line = parse_caraml(proc.stdout)["global"]
    assert line["micro_batch_size"] == plan[2]
    measured = float(line["memory_max_allocated_gib"])
    assert measured <= usable
    # the estimate counts what the plan knows; the allocator's peak adds
    # workspaces and transients the plan leaves to its free fraction
    assert 0.75 <= measured / estimate <= 1.10, (measured, estimate)


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
