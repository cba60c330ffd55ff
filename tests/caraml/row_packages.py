"""Work packages as a JUBE run leaves them (the folder layout, JUBE's
workpackages.xml, the job's files), written for the row model's tests."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

START = "CARAML job: start=2026-11-24T05:00:00+00:00 host=cn1 job_id=none"
PROVENANCE = ("CARAML provenance: commit=1d3448ffe2ac clean=yes torch=2.6.0 cuda=12.4 rocm=- "
              "device_name=NVIDIA_A100-SXM4-40GB devices=4 load=0.1 cpus=128 other_benchmarks=0")
AT_END = "CARAML host at end: load=0.2 cpus=128 other_benchmarks=0 foreign_cpu_pct=0.5"
LLM_GLOBAL = ("CARAML global: backend=megatron model_size=800M params=810000000 devices=4 tp=1 "
              "pp=1 dp=4 global_batch_size=512 micro_batch_size=4 seq_length=2048 precision=bf16 "
              "time_per_iteration_s=10.0 tokens_per_s=104857.6 tokens_per_s_median=104000.0 "
              "tokens_per_s_per_device=26214.4 tflops_per_device=150.0 "
              "model_tflops_per_device=128.0 mfu=0.410256 peak_tflops=312 peak_basis=datasheet peak_key=A100 "
              "tokens_total=1048576 tokens_timed=524288 nodes=1 iterations=90 "
              "iterations_total=100 loss=3.2")
IMAGE_GLOBAL = ("CARAML global: model=resnet50 precision=fp16 devices=4 global_batch_size=256 "
                "batch_size_per_device=64 time_per_iteration_s=0.2 images_per_s_mean=1280.0 "
                "images_per_s_median=1290.0 images_per_s_per_device=320.0 samples_total=25600 "
                "samples_timed=23040 nodes=1 iterations=90 iterations_total=100")
OPERATOR_GLOBAL = ("CARAML global: problem=rbc3d model=FNO precision=fp32 compile=default devices=4 "
                   "global_batch_size=16 batch_size_per_device=4 time_per_iteration_s=0.05 "
                   "samples_per_s_mean=320.0 samples_per_s_median=321.0 "
                   "samples_per_s_per_device=80.0 samples_total=1600 samples_timed=1440 "
                   "samples_per_epoch=1024 epoch_s=3.2 nodes=1 iterations=90 iterations_total=100")
JPWR = "\n".join([
    "jpwr-summary: total_wh=40.0 devices=4 wh_per_device=10.0 mean_w_per_device=300.0 max_w=390.0 "
    "duration_s=120.0 methods=pynvml source=measured scope=gpu basis=counter counter_vs_integrated_pct=0.5 "
    "missing_pct=0.0",
    "jpwr-hosts: cn1=40.0",
    "jpwr-scope: scope=gpu total_wh=40.0 devices=4 wh_per_device=10.0 basis=counter",
    "jpwr-scope: scope=module total_wh=48.0 devices=4 wh_per_device=12.0 basis=counter",
    "jpwr-scopes: gpu=40.0 module=48.0",
    "jpwr-window: window=timed scope=gpu counted=yes total_wh=36.0 devices=4 wh_per_device=9.0 "
    "duration_s=100.0 basis=counter",
    "jpwr-window: window=timed scope=module counted=no total_wh=43.2 devices=4 wh_per_device=10.8 "
    "duration_s=100.0 basis=counter",
]) + "\n"
PARAMS = {"system_name": "A100", "system_description": "JURECA-DC node with 4x A100",
          "device_kind": "cuda", "device_unit": "GPU", "tdp_w": "400", "nodes": "1",
          "devices_per_node": "4", "total_devices": "4", "energy_scope": "counted",
          "planned_iterations": "100", "model_size": "800M", "global_batch_size": "",
          "model": "resnet50", "precision": "fp16", "image_size": "224",
          "row_benchmark": "llm"}


def run_dir(tmp: Path, params: dict | None = None, *, with_data_step: bool = False) -> Path:
    """A run directory with one execute work package (id 1; the data step
    0 where asked for) and JUBE's record of its parameters."""
    run = tmp / "000000"
    root = ET.Element("workpackages")
    values = {**PARAMS, **(params or {})}
    for wp_id, step in ((0, "prepare_data"), (1, "execute")):
        if step == "prepare_data" and not with_data_step:
            continue
        wp = ET.SubElement(root, "workpackage", id=str(wp_id))
        ET.SubElement(wp, "step").text = step
        sets = ET.SubElement(wp, "parameterset")
        for name, value in values.items():
            p = ET.SubElement(sets, "parameter", name=name, mode="text")
            ET.SubElement(p, "value").text = value
        if step == "execute" and with_data_step:
            ET.SubElement(wp, "parents").text = "0"
        (run / f"{wp_id:06d}_{step}" / "work").mkdir(parents=True)
    ET.ElementTree(root).write(run / "workpackages.xml")
    return run


def execute(run: Path) -> Path:
    return run / "000001_execute" / "work"


def write(folder: Path, **files: str) -> None:
    for name, text in files.items():
        (folder / name.replace("_", ".")).write_text(text)


def finished_job(stop: str = "iteration count 100 reached", status: int = 0,
                 global_line: str = LLM_GLOBAL, at_end: str = AT_END) -> str:
    return "\n".join([START, PROVENANCE, at_end, f"CARAML stop: {stop}", global_line,
                      f"CARAML job: end=2026-11-24T05:10:00+00:00 status={status}", ""])
