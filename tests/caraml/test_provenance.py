"""Provenance: the file a driver's rank 0 writes per work package, and the
short line the result table reads."""

import json
import subprocess

import pytest
import torch

from caraml.node import provenance
from caraml.row import facts as row_facts
from llm_training.pretrain_gpt import main as pretrain_main
from tests.driver_runs import parse_caraml

TINY_GPT = ["--model-size", "cpu-small", "--num-layers", "1", "--hidden-size", "32",
            "--num-attention-heads", "2", "--seq-length", "16", "--synthetic", "--vocab-size", "128",
            "--micro-batch-size", "2", "--global-batch-size", "4", "--num-workers", "0",
            "--device", "cpu", "--log-interval", "1"]


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_suite_state_names_the_commit_and_a_changed_tree(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "run_folder").mkdir()  # untracked output is no change to the suite
    assert provenance.suite_state(tmp_path) == {"commit": head, "clean": True}
    (tmp_path / "a.py").write_text("x = 2\n")
    assert provenance.suite_state(tmp_path) == {"commit": head, "clean": False}


def test_outside_a_checkout_nothing_is_guessed(tmp_path):
    assert provenance.suite_state(tmp_path) == {"commit": None, "clean": None}


def test_a_driver_run_writes_the_file_and_the_line(tmp_path, capsys):
    code = pretrain_main([*TINY_GPT, "--train-iters", "2", "--warmup-iters", "1",
                          "--energy-methods", "estimate", "--energy-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    facts = json.loads((tmp_path / provenance.FILE_NAME).read_text())
    assert facts["torch"] == torch.__version__ and facts["devices"] == 1
    assert facts["commit"] == git(provenance.SUITE_ROOT, "rev-parse", "HEAD")
    for key in ("python", "cuda", "rocm", "nccl", "cudnn", "megatron_core", "torchvision",
                "jube", "gpu_driver", "device_names", "power_limits_w", "container",
                "hostnames", "slurm_job_id", "date", "clean", "load_1min", "cpus",
                "other_benchmark_processes"):
        assert key in facts
    at_end = parse_caraml(out)["host at end"]
    assert list(at_end) == ["load", "cpus", "other_benchmarks", "foreign_cpu_pct",
                            "foreign_cpu_pct_by_host"]
    assert float(at_end["load"]) >= 0
    line = parse_caraml(out)["provenance"]
    assert line["commit"] == facts["commit"][:12] and line["torch"] == torch.__version__
    assert list(line) == list(provenance.LINE_FIELDS)


@pytest.mark.parametrize("clean, shown", [(True, "yes"), (False, "no"), (None, "-")])
def test_line_fields_have_no_spaces_or_commas(clean, shown):
    facts = {"commit": "0123456789abcdef", "clean": clean, "torch": "2.6.0+cu124", "cuda": "12.4",
             "device_type": "cpu",
             "rocm": None, "device_names": ["AMD EPYC 7763 64-Core Processor, rev 1"],
             "devices": 2, "load_1min": 1.5, "cpus": 2, "other_benchmark_processes": None}
    fields = provenance.line_fields(facts)
    assert fields["clean"] == shown and fields["cuda"] == "-" and fields["commit"] == "0123456789ab"
    assert (fields["load"], fields["other_benchmarks"]) == ("1.5", "-")
    assert all(" " not in v and "," not in v for v in fields.values())


def fake_process(proc, pid, command, **environ):
    folder = proc / str(pid)
    folder.mkdir(parents=True)
    (folder / "cmdline").write_bytes(b"\0".join(part.encode() for part in command.split()) + b"\0")
    (folder / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in environ.items()))


def test_other_benchmarks_on_the_host_are_counted_and_this_jobs_ranks_are_not(tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv(provenance.JOB_KEY, "vm-4242")
    # this job's other rank, and its torchrun (whose MASTER_PORT is not the workers')
    fake_process(tmp_path, 100, "python -m llm_training.pretrain_gpt --x", CARAML_JOB="vm-4242",
                 MASTER_PORT="29500")
    fake_process(tmp_path, 101, "python -m torch.distributed.run -m llm_training.pretrain_gpt --x",
                 CARAML_JOB="vm-4242", MASTER_PORT="29400")
    # another job's rank, and a driver started by hand
    fake_process(tmp_path, 102, "python -m llm_training.pretrain_gpt --x", CARAML_JOB="vm-4300")
    fake_process(tmp_path, 103, "python image_classification/image_classification_torch.py")
    # every driver of the benchmark table counts, the operator driver too
    fake_process(tmp_path, 105, "python -m operator_benchmark.fno_training --x", CARAML_JOB="vm-4300")
    fake_process(tmp_path, 104, "sleep 100")
    assert provenance.other_benchmarks(tmp_path) == 3


def test_a_gpu_run_names_its_cuda():
    facts = {"commit": None, "clean": None, "torch": "2.6.0+cu124", "cuda": "12.4", "rocm": None,
             "device_type": "cuda", "device_names": ["NVIDIA H100 80GB HBM3"], "devices": 4,
             "load_1min": 0.2, "cpus": 288, "other_benchmark_processes": 0}
    fields = provenance.line_fields(facts)
    assert (fields["cuda"], fields["rocm"], fields["device_name"]) == ("12.4", "-", "NVIDIA_H100_80GB_HBM3")


def test_the_line_names_the_gpu_driver_and_the_images_digest_for_the_system_card():
    facts = {"commit": None, "clean": None, "torch": "2.6.0", "cuda": "12.4", "rocm": None,
             "device_type": "cuda", "device_names": ["NVIDIA A100-SXM4-40GB"], "devices": 4,
             "load_1min": 0.2, "cpus": 128, "other_benchmark_processes": 0,
             "gpu_driver": "nvidia 550.54.15",
             "container": {"image": "/c/caraml_nvidia_x86.sif", "sha256": "ab" * 32}}
    fields = provenance.line_fields(facts)
    assert (fields["driver"], fields["container"]) == ("nvidia_550.54.15", "ab" * 6)
    job_out = f"CARAML provenance: {' '.join(f'{k}={v}' for k, v in fields.items())}\n"
    assert (row_facts.provenance(job_out)["driver"], row_facts.provenance(job_out)["container"]) == \
        ("nvidia_550.54.15", "ab" * 6)


# First lines of /proc/driver/nvidia/version: the proprietary module's, and
# the open module's form (from which an H200 node's row once recorded the
# driver as "nvidia for")
@pytest.mark.parametrize("line, driver", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024",
     "nvidia 550.54.15"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
     "(dvs-builder@U22-I3-AF03-09-1)  Thu Oct 30 00:18:51 UTC 2025", "nvidia 580.159.04"),
])
def test_the_gpu_driver_is_the_kernel_modules_version(tmp_path, line, driver):
    version = tmp_path / "version"
    version.write_text(line + "\nGCC version:  gcc version 12.3.0\n")
    assert provenance.gpu_driver(str(version), str(tmp_path / "no-amdgpu")) == driver


@pytest.mark.parametrize("value, shown", [("1", "1"), (None, "-")])
def test_rocms_tf32_switch_reaches_the_file_the_line_and_the_row(monkeypatch, value, shown):
    if value is None:
        monkeypatch.delenv("HIPBLASLT_ALLOW_TF32", raising=False)
    else:
        monkeypatch.setenv("HIPBLASLT_ALLOW_TF32", value)
    facts = provenance.collect("cpu", 1, ["host"])
    assert facts["hipblaslt_allow_tf32"] == value
    fields = provenance.line_fields(facts)
    assert fields["hipblaslt_allow_tf32"] == shown
    job_out = f"CARAML provenance: {' '.join(f'{k}={v}' for k, v in fields.items())}\n"
    assert row_facts.provenance(job_out)["hipblaslt_allow_tf32"] == value
