"""What every peer comparison records about itself (the command, the date,
the device, the software, the host's load) and where its JSON file goes:
docs/perf/, one file per run, named after the comparison, the device and
the date."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path

import torch

from caraml.node.dist import Dist
from caraml.node.provenance import collect

OUT = Path(__file__).resolve().parents[2] / "docs" / "perf"


def device_name(dist: Dist) -> str:
    if dist.device.type == "cuda":
        return torch.cuda.get_device_name(dist.device)
    return platform.processor() or "CPU"


def header(benchmark: str, dist: Dist) -> dict:
    return {
        "benchmark": benchmark,
        "command": " ".join([f"aux/perf/{benchmark}.py", *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device_name(dist),
        "interleaved": True,
        "provenance": collect(dist.device.type, 1, [dist.hostname]),
        # the host's load as the record is made; each as-run round records its own
        "load_1min": round(os.getloadavg()[0], 2),
    }


def print_table(columns: list[str], rows: list[list[str]]) -> None:
    """A markdown table on stdout, to paste into docs/results.md."""
    for cells in (columns, ["---"] * len(columns), *rows):
        print("| " + " | ".join(cells) + " |")


def write(record: dict, out: Path, *name: str) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    parts = [record["benchmark"], record["device"].replace(" ", "_"), *name, record["date"][:10]]
    path = out / ("_".join(parts) + ".json")
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path
