"""The JUBE files only read what the row model decided: no pattern is a
program (at most three lines of a python-mode expression), and the full
table's columns are the ones of aux/caraml_columns.xml in every benchmark
script. JUBE 2.5.1 reads no XML include inside a YAML table, so the LLM
scripts' table file writes the same sets out; this keeps the two equal."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import yaml

from tests.jube_runs import ROOT

XML_FILES = ["platform.xml", "image_classification/image_classification_torch_benchmark.xml"]
YAML_FILES = ["llm_training/llm_benchmark_nvidia_amd.yaml", "llm_training/llm_benchmark_ipu.yaml"]


class _Loader(yaml.SafeLoader):
    """PyYAML with JUBE's !include left unread (the included file is checked itself)."""


_Loader.add_constructor("!include", lambda loader, node: None)


def _yaml(path: str) -> dict:
    return yaml.load((ROOT / path).read_text(), Loader=_Loader)


def test_no_pattern_is_a_program():
    long = []
    for path in XML_FILES:
        for p in ET.parse(ROOT / path).getroot().iter("pattern"):
            if p.get("mode") == "python" and len((p.text or "").strip().splitlines()) > 3:
                long.append((path, p.get("name")))
    for path in YAML_FILES:
        for patternset in _yaml(path)["patternset"]:
            for p in patternset.get("pattern", []):
                if p.get("mode") == "python" and len(str(p["_"]).strip().splitlines()) > 3:
                    long.append((path, p["name"]))
    assert long == []


def _xml_columns(sets: list[str]) -> list[tuple[str, str, str | None]]:
    root = ET.parse(ROOT / "aux" / "caraml_columns.xml").getroot()
    return [(c.get("title"), c.text, c.get("format"))
            for s in sets for c in root.findall(f"column[@set='{s}']")]


def test_the_llm_tables_have_the_shared_columns_and_keys():
    result = _yaml("llm_training/llm_tables.yaml")["result"]
    [csv] = [t for t in result["table"] if t["name"] == "result_csv"]
    assert [(c["title"], c["_"], c.get("format")) for c in csv["column"]] == \
        _xml_columns(["head", "llm", "tail"])
    root = ET.parse(ROOT / "aux" / "caraml_columns.xml").getroot()
    [database] = result["database"]
    assert database["key"] == [k.text for s in ("all", "llm") for k in root.findall(f"key[@set='{s}']")]


def test_the_image_table_includes_the_shared_columns():
    result = ET.parse(ROOT / XML_FILES[1]).getroot().find("benchmark/result")
    csv = result.find("table[@name='result_csv']")
    assert [i.get("path") for i in csv.iter("include")] == \
        ["column[@set='head']", "column[@set='image']", "column[@set='tail']"]
    assert [i.get("path") for i in result.find("database").iter("include")] == \
        ["key[@set='all']", "key[@set='image']"]


def test_every_table_reads_a_pattern_or_parameter_that_exists():
    root = ET.parse(ROOT / "aux" / "caraml_columns.xml").getroot()
    rows = {p.get("name") for p in ET.parse(ROOT / "platform.xml").getroot().iter("pattern")}
    row_columns = {c.text for c in root.iter("column")} | {k.text for k in root.iter("key")}
    # what the row model prints is a pattern of platform.xml
    assert {c for c in row_columns if c.startswith("row_")} <= rows
