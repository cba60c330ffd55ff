"""Result tables written by hand into folders shaped like JUBE run
directories, for figures whose expected values are computed by hand. The
end-to-end test (test_e2e_compare.py) reads tables that real JUBE wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

LLM_ROW = {
    "System": "A100", "Backend": "megatron", "ModelSize": "800M", "Data": "synthetic", "Precision": "fp16",
    "Nodes": 1, "Devices": 4, "TP": 1, "PP": 1, "DP": 4, "GlobalBatchSize": 512, "SequenceLength": 2048,
    "Iterations": 90, "Time/iteration(s)": 1.0, "Tokens/s": 80000.0, "Tokens/s/device": 20000.0,
    "TFLOP/s/device": 100.0, "MFU": 0.4, "PeakSource": "datasheet", "Energy(Wh)": 40.0,
    "Energy/device(Wh)": 10.0, "Tokens/Wh": 200000, "MeanPower/device(W)": 400.0,
    "EnergySource": "measured(pynvml)", "Status": "ok", "Error": "",
}
IMAGE_ROW = {
    "System": "A100", "Model": "resnet50", "ImageSize": 224, "Precision": "fp16", "Nodes": 1, "Devices": 4,
    "GlobalBatchSize": 256, "BatchSize/Device": 64, "Images/s": 4000.0, "Images/s(median)": 4000.0,
    "Images/s/device": 1000.0, "Energy(Wh)": 20.0, "Energy/device(Wh)": 5.0, "Images/Wh": 5000,
    "MeanPower/device(W)": 300.0, "EnergySource": "measured(pynvml)", "Status": "ok", "Error": "",
}


def run_dir(root: Path, name: str, base: dict, changes: list[dict], drop: tuple[str, ...] = ()) -> Path:
    """outpath `name` with run 000000 holding one row per entry of changes."""
    path = root / name / "000000"
    (path / "result").mkdir(parents=True)
    for marker in ("configuration.xml", "workpackages.xml"):
        (path / marker).write_text("<jube/>\n")
    table = pd.DataFrame([{**base, **change} for change in changes]).drop(columns=list(drop))
    csv = path / "result" / "result_csv.dat"
    table.to_csv(csv, index=False)
    # newer than the run's files, so that no `jube result` is attempted
    stamp = (path / "workpackages.xml").stat().st_mtime + 10
    os.utime(csv, (stamp, stamp))
    return path.parent
