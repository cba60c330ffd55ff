"""The repeat tag (caraml/repeats.py): the indices JUBE expands, every
benchmark script declaring `repeat` first in the parameterset of its
sweeps, which makes JUBE run every configuration once before any twice
(JUBE varies a set's first parameter slowest), and the configuration whose
repeats JUBE's statistics go over (caraml/row/repeat_group.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from caraml import repeats
from caraml.jube_run import WorkPackage
from caraml.row import repeat_group

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = {  # script: the parameterset that holds its sweeps
    "image_classification/image_classification_torch_benchmark.xml": "benchmarkParameter",
    "operator_benchmark/fno_benchmark.xml": "benchmarkParameter",
    "tests/tiny_benchmark.xml": "benchmarkParameter",
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


def _package(wp_id: int, params: dict[str, str], definitions: dict[str, str], parents=()) -> WorkPackage:
    return WorkPackage(wp_id, "execute", tuple(parents), params, frozenset(), definitions)


def test_a_configuration_is_every_parameter_but_the_repeat_and_what_differs_by_work_package():
    data = _package(0, {"corpus": "oscar"}, {"corpus": "oscar"})
    # JUBE's record lists the script's parameters, not its own per work package (jube_wp_id)
    definitions = {"repeat": "${expand_tool} -m caraml.repeats", "global_batch_size": "${batch_sweep}",
                   "job_name": "caraml_${jube_benchmark_name}_${jube_wp_id}",
                   "job_facts": "job_name=${job_name}\nnodes=${nodes}", "nodes": "1",
                   "prefix": "$$CARAML_ROOT/${repeat_free}", "repeat_free": "x",
                   "root": "${jube_benchmark_home}/.."}
    planned = {0: data}
    configs = []
    for wp_id, (repeat, batch) in enumerate([("1", "8"), ("2", "8"), ("1", "16")], 1):
        params = {"repeat": repeat, "global_batch_size": batch, "job_name": f"caraml_x_{wp_id}",
                  "job_facts": f"job_name=caraml_x_{wp_id}\nnodes=1", "nodes": "1",
                  "prefix": "$CARAML_ROOT/x", "repeat_free": "x", "root": "/site/.."}
        planned[wp_id] = _package(wp_id, params, definitions, parents=(0,))
        configs.append(repeat_group.configuration(planned[wp_id], planned))
    # the repeat and the job's name (and its facts, made from it) differ by work package;
    # what JUBE's run-wide parameters give stays
    assert configs[0] == {"corpus": "oscar", "global_batch_size": "8", "nodes": "1",
                          "prefix": "$CARAML_ROOT/x", "repeat_free": "x", "root": "/site/.."}
    assert configs[0] == configs[1] != configs[2]
    assert repeat_group.key(configs[0]) == repeat_group.key(dict(reversed(configs[1].items())))
