"""The repeat tag (caraml/repeats.py): the indices JUBE expands, and every
benchmark script declaring `repeat` first in the parameterset of its
sweeps, which makes JUBE run every configuration once before any twice
(JUBE varies a set's first parameter slowest)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from caraml import repeats

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {  # script: the parameterset that holds its sweeps
    "image_classification/image_classification_torch_benchmark.xml": "benchmarkParameter",
    "operator_benchmark/fno_benchmark.xml": "benchmarkParameter",
    "llm_training/llm_benchmark_nvidia_amd.yaml": "modelParameter",
    "llm_training/llm_benchmark_ipu.yaml": "modelParameter",
}


def test_the_indices_are_three_runs_unless_the_setting_says_otherwise(capsys, monkeypatch):
    assert repeats.indices({}) == [1, 2, 3]
    assert repeats.indices({repeats.ENV: "5"}) == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="CARAML_REPEATS='0' is no positive whole number"):
        repeats.indices({repeats.ENV: "0"})
    monkeypatch.setenv(repeats.ENV, "2")
    assert repeats.main([]) == 0 and capsys.readouterr().out == "1;2"


def _names(script: Path, parameterset: str) -> list[tuple[str, str | None]]:
    if script.suffix == ".xml":
        found = next(s for s in ET.parse(script).iter("parameterset") if s.get("name") == parameterset)
        return [(p.get("name"), p.get("tag")) for p in found.iter("parameter")]
    loader = type("Loader", (yaml.SafeLoader,), {})  # JUBE's !include: not needed here
    loader.add_constructor("!include", lambda *_: None)
    found = next(s for s in yaml.load(script.read_text(), loader)["parameterset"]
                 if s["name"] == parameterset)
    return [(p["name"], p.get("tag")) for p in found["parameter"]]


@pytest.mark.parametrize("script, parameterset", SCRIPTS.items())
def test_every_script_declares_repeat_first_in_the_set_of_its_sweeps(script, parameterset):
    names = _names(ROOT / script, parameterset)
    assert names[:2] == [("repeat", None), ("repeat", "repeat")]
