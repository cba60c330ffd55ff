"""The raw evidence a driver run keeps beside its energy files: every
timed iteration on every rank, losses and skips, one iteration's work and
FLOPs (iterations.json), and the machine and build (provenance.json); its
summary line is made of exactly these."""

from __future__ import annotations

import json
import statistics

from caraml.node import provenance
from caraml.report import last_kv
from llm_training.flops import recounted
from llm_training.pretrain_gpt import main as pretrain_main

TINY_GPT = ["--model-size", "cpu-small", "--num-layers", "1", "--hidden-size", "32",
            "--num-attention-heads", "2", "--seq-length", "16", "--synthetic", "--vocab-size", "128",
            "--micro-batch-size", "2", "--global-batch-size", "4", "--num-workers", "0",
            "--device", "cpu", "--log-interval", "1", "--peak-tflops", "0.5"]


def test_an_llm_run_keeps_what_its_summary_line_is_made_of(tmp_path, capsys):
    assert pretrain_main([*TINY_GPT, "--train-iters", "7", "--warmup-iters", "2",
                          "--energy-methods", "estimate", "--energy-dir", str(tmp_path)]) == 0
    line = last_kv(capsys.readouterr().out, "global")
    kept = json.loads((tmp_path / "iterations.json").read_text())
    assert (kept["iterations_total"], kept["warmup_iterations"], len(kept["timed_s"])) == (7, 2, 5)
    assert kept["timed_s"] == [max(times) for times in zip(*kept["timed_s_by_rank"])]
    assert float(line["time_per_iteration_s"]) == float(f"{statistics.fmean(kept['timed_s']):.6g}")
    assert len(kept["losses"]) == 7 and float(line["loss_first"]) == float(f"{kept['losses'][0]:.6g}")
    assert kept["skipped_by_rank"] == [[0] * 7]
    # one iteration: 4 sequences of 16 tokens, its FLOPs counted again from the model it records
    assert kept["work_per_iteration"] == 64 == int(line["tokens_timed"]) // 5
    assert recounted(kept["model"]) == {name: kept[name] for name in
                                        ("work_per_iteration", "model_flops_per_iteration",
                                         "hardware_flops_per_iteration", "params")}
    assert kept["peak"] == {"tflops": 0.5, "basis": "datasheet", "key": None, "windows": []}
    machine = json.loads((tmp_path / "provenance.json").read_text())
    [host] = machine["machine"]
    assert host["host"] == machine["hostnames"][0] and host["cpu_model"] == provenance.cpu_name()
    assert host["accelerators"] == [] and machine["lock_sha256"] == provenance.lock_sha256()


def test_the_lock_hash_names_the_lock_files_and_their_content(tmp_path):
    lock = tmp_path / "aux" / "lock"
    lock.mkdir(parents=True)
    assert provenance.lock_sha256(tmp_path) is None
    (lock / "main.txt").write_text("torch==2.13.0 --hash=sha256:aa\n")
    first = provenance.lock_sha256(tmp_path)
    (lock / "main.txt").write_text("torch==2.13.1 --hash=sha256:bb\n")
    assert provenance.lock_sha256(tmp_path) not in (None, first)
