"""The JUBE files only read what the row model decided: no pattern is a
program (at most three lines of a python-mode expression), and the full
table's columns are the ones of aux/caraml_columns.xml in every benchmark
script. JUBE 2.5.1 reads no XML include inside a YAML table, so the LLM
scripts' table file writes the same sets out; this keeps the two equal."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import yaml

from tests.jube_runs import ROOT

XML_FILES = ["platform.xml", "image_classification/image_classification_torch_benchmark.xml",
             "operator_benchmark/fno_benchmark.xml"]
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
    [container] = [t for t in result["table"] if t["name"] == "container"]
    assert [(c["title"], c["_"], c.get("format")) for c in container["column"]] == \
        _xml_columns(["container"])
    # a container build has only the container table; a benchmark run every other one
    assert {t["name"]: t["tag"] for t in result["table"]} == {
        "result": "!container", "issues": "!container", "result_csv": "!container",
        "container": "container"}
    root = ET.parse(ROOT / "aux" / "caraml_columns.xml").getroot()
    [database] = result["database"]
    assert database["key"] == [k.text for s in ("all", "llm") for k in root.findall(f"key[@set='{s}']")]


@pytest.mark.parametrize("script, own, database", [
    (XML_FILES[1], "image", "image_rows"), (XML_FILES[2], "operator", "operator_rows")])
def test_the_xml_tables_include_the_shared_columns(script, own, database):
    result = ET.parse(ROOT / script).getroot().find("benchmark/result")
    csv = result.find("table[@name='result_csv']")
    assert [i.get("path") for i in csv.iter("include")] == \
        ["column[@set='head']", f"column[@set='{own}']", "column[@set='tail']"]
    [db] = result.findall("database")
    assert db.get("name") == database and db.get("file") == "results/caraml_rows.sqlite"
    assert [i.get("path") for i in db.iter("include")] == ["key[@set='all']", f"key[@set='{own}']"]
    container = result.find("table[@name='container']")
    assert [i.get("path") for i in container.iter("include")] == ["column[@set='container']"]
    assert {t.get("name"): t.get("tag") for t in result.iter("table")} == {
        "result": "!container", "issues": "!container", "result_csv": "!container",
        "container": "container"}


def test_the_operator_set_reads_the_operator_scripts_patterns_and_parameters():
    """A column of a name the script neither reads nor sets stays empty in every row."""
    root = ET.parse(ROOT / "aux" / "caraml_columns.xml").getroot()
    script = ET.parse(ROOT / XML_FILES[2]).getroot()
    named = {e.get("name") for e in script.iter() if e.tag in ("pattern", "parameter")}
    own = {c.text for c in root.findall("column[@set='operator']")} | \
        {k.text for k in root.findall("key[@set='operator']")}
    assert {c for c in own if not c.startswith("row_")} <= named


def test_every_table_reads_a_pattern_or_parameter_that_exists():
    root = ET.parse(ROOT / "aux" / "caraml_columns.xml").getroot()
    rows = {p.get("name") for p in ET.parse(ROOT / "platform.xml").getroot().iter("pattern")}
    row_columns = {c.text for c in root.iter("column")} | {k.text for k in root.iter("key")}
    # what the row model prints is a pattern of platform.xml
    assert {c for c in row_columns if c.startswith("row_")} <= rows
