"""The JUBE files only read what the row model decided: no parameter or
pattern is a program (a python-mode value is one line), and the full
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
# every JUBE file of the suite: the benchmarks' scripts and what they include
JUBE_XML = [*XML_FILES, "aux/caraml_columns.xml"]
JUBE_YAML = [*YAML_FILES, "llm_training/llm_steps.yaml", "llm_training/llm_tables.yaml"]


class _Loader(yaml.SafeLoader):
    """PyYAML with JUBE's !include left unread (the included file is checked itself)."""


_Loader.add_constructor("!include", lambda loader, node: None)


def _yaml(path: str) -> dict:
    return yaml.load((ROOT / path).read_text(), Loader=_Loader)


def _python_mode_lines_yaml(text: str) -> list[tuple[str, int]]:
    """(name, source lines) of every python-mode value of a YAML text: the
    lines as written (a folded `>-` block is one line to JUBE, several to
    the reader)."""
    found = []

    def walk(node):
        if isinstance(node, yaml.MappingNode):
            pairs = {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}
            mode, value = pairs.get("mode"), pairs.get("_")
            if getattr(mode, "value", None) == "python" and value is not None:
                written = text[value.start_mark.index:value.end_mark.index].strip().splitlines()
                if value.style in (">", "|"):
                    written = written[1:]  # the block's indicator line
                found.append((getattr(pairs.get("name"), "value", "?"), len(written)))
            for _, child in node.value:
                walk(child)
        elif isinstance(node, yaml.SequenceNode):
            for child in node.value:
                walk(child)

    walk(yaml.compose(text, Loader=_Loader))
    return found


def test_every_python_mode_value_of_every_jube_file_is_one_line():
    """A JUBE file declares; a decision is tested Python. A python-mode
    parameter or pattern is one expression on one line."""
    long = [(path, e.get("name")) for path in JUBE_XML for e in ET.parse(ROOT / path).getroot().iter()
            if e.get("mode") == "python" and len((e.text or "").strip().splitlines()) > 1]
    long += [(path, name) for path in JUBE_YAML
             for name, lines in _python_mode_lines_yaml((ROOT / path).read_text()) if lines > 1]
    assert long == []


def test_the_one_line_check_sees_a_folded_yaml_block():
    folded = ("parameterset:\n  - name: p\n    parameter:\n      - name: x\n"
              "        mode: python\n        _: >-\n          1 +\n          2\n"
              "      - {name: y, mode: python, _: '3'}\n")
    assert _python_mode_lines_yaml(folded) == [("x", 2), ("y", 1)]


def _xml_columns(sets: list[str]) -> list[tuple[str, str, str | None]]:
    root = ET.parse(ROOT / "aux" / "caraml_columns.xml").getroot()
    return [(c.get("title"), c.text, c.get("format"))
            for s in sets for c in root.findall(f"column[@set='{s}']")]


def test_the_llm_tables_have_the_shared_columns():
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
    # the row model keeps the history (caraml/history.py); JUBE's <database> would overwrite it
    assert "database" not in result


@pytest.mark.parametrize("script, own", [(XML_FILES[1], "image"), (XML_FILES[2], "operator")])
def test_the_xml_tables_include_the_shared_columns(script, own):
    result = ET.parse(ROOT / script).getroot().find("benchmark/result")
    csv = result.find("table[@name='result_csv']")
    assert [i.get("path") for i in csv.iter("include")] == \
        ["column[@set='head']", f"column[@set='{own}']", "column[@set='tail']"]
    container = result.find("table[@name='container']")
    assert [i.get("path") for i in container.iter("include")] == ["column[@set='container']"]
    assert {t.get("name"): t.get("tag") for t in result.iter("table")} == {
        "result": "!container", "issues": "!container", "result_csv": "!container",
        "container": "container"}
    assert result.findall("database") == []


def test_the_operator_set_reads_the_operator_scripts_patterns_and_parameters():
    """A column of a name the script neither reads nor sets stays empty in every row."""
    root = ET.parse(ROOT / "aux" / "caraml_columns.xml").getroot()
    script = ET.parse(ROOT / XML_FILES[2]).getroot()
    rows = ET.parse(ROOT / "platform.xml").getroot().find("patternset[@name='rowPatterns']")
    named = {e.get("name") for e in [*script.iter(), *rows] if e.tag in ("pattern", "parameter")}
    own = {c.text for c in root.findall("column[@set='operator']")} | \
        {k.text for k in root.findall("key[@set='operator']")}
    assert {c for c in own if not c.startswith("row_")} <= named


def test_every_table_reads_a_pattern_or_parameter_that_exists():
    root = ET.parse(ROOT / "aux" / "caraml_columns.xml").getroot()
    rows = {p.get("name") for p in ET.parse(ROOT / "platform.xml").getroot().iter("pattern")}
    row_columns = {c.text for c in root.iter("column")} | {k.text for k in root.iter("key")}
    # what the row model prints is a pattern of platform.xml
    assert {c for c in row_columns if c.startswith("row_")} <= rows


def _analysed_files() -> list[tuple[str, str, str, str]]:
    """(script, step, file, patternsets) of every file every benchmark script's analyser reads."""
    found = []
    for script in [*XML_FILES[1:], "tests/tiny_benchmark.xml"]:
        for analyse in ET.parse(ROOT / script).getroot().iter("analyse"):
            found += [(script, analyse.get("step"), f.text, f.get("use")) for f in analyse.iter("file")]
    for script in YAML_FILES:
        for analyse in _yaml(script)["analyser"]["analyse"]:
            found += [(script, analyse["step"], f["_"], f["use"]) for f in analyse["file"]]
    return found


def test_a_rows_status_is_the_row_models_alone():
    """platform.xml decides nothing: its patterns read the row model's lines,
    which each step's row.out holds until the combine step prints them."""
    platform = ET.parse(ROOT / "platform.xml").getroot()
    assert [s.get("name") for s in platform.iter("patternset")] == ["rowPatterns"]
    assert all(p.text.startswith("^CARAML row") and p.get("mode") is None
               for p in platform.iter("pattern"))
    files = _analysed_files()
    read_rows = {(script, step, file) for script, step, file, use in files if "rowPatterns" in use}
    steps = {(script, step) for script, step, _, _ in files}
    assert read_rows == {(script, step, "stdout" if step == "combine_energy" else "row.out")
                         for script, step in steps}
