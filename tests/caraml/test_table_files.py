"""The JUBE files only read what the row model decided: no parameter or
pattern is a program (a python-mode value is one line), the tables JUBE
prints are the short ones, and every column of the full table, which the
row model writes (caraml/row/full_table.py, with each benchmark's columns
of the table), names a value the row model has."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import yaml

from tests.jube_runs import ROOT

XML_FILES = ["platform.xml", "image_classification/image_classification_torch_benchmark.xml",
             "operator_benchmark/fno_benchmark.xml"]
YAML_FILES = ["llm_training/llm_benchmark_nvidia_amd.yaml", "llm_training/llm_benchmark_ipu.yaml"]
# every JUBE file of the suite: the benchmarks' scripts and what they include
JUBE_XML = XML_FILES
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


CONTAINER = [("System", "system_name"), ("Container", "container"), ("Status", "status"),
             ("Cause", "reason")]


REPEATS_MEAN = ("row_per_s_avg", "row_per_s_std", "row_work_per_wh_timed_avg")


def _repeats_table(columns: list[tuple[str, str]], table_filter: str) -> None:
    """The repeat tag's table: one line per configuration (its first
    repeat's), how many runs and measurements, and JUBE's own mean and
    spread of the rate and the work per Wh, read from the typed patterns,
    with the energy's scope and whether it is measured or estimated."""
    names = [name for _, name in columns]
    assert table_filter == "'${repeat}' == '${row_repeat_min}'"
    assert {"row_repeat_cnt", "row_measured_cnt", *REPEATS_MEAN, "row_energy_scope",
            "row_energy_kind"} <= set(names)
    assert len({title for title, _ in columns}) == len(columns)  # JUBE keys a table's columns by title


def test_the_llm_tables_are_the_short_ones_and_the_container_build():
    short, repeats = _yaml("llm_training/llm_tables.yaml")["result"]
    assert (short["use"], repeats["use"]) == ("analyse", "analyse_repeats")
    [container] = [t for t in short["table"] if t["name"] == "container"]
    assert [(c["title"], c["_"]) for c in container["column"]] == CONTAINER
    # a container build has only the container table; a benchmark run the two
    # short ones (JUBE prints every table: the full one is the row model's CSV)
    assert {t["name"]: t["tag"] for t in short["table"]} == {
        "result": "!container", "issues": "!container", "container": "container"}
    [table] = repeats["table"]
    assert (table["name"], table["tag"]) == ("repeats", "repeat")
    _repeats_table([(c["title"], c["_"]) for c in table["column"]], table["filter"])
    # the row model keeps the history (caraml/row/history.py); JUBE's <database> would overwrite it
    assert "database" not in short and "database" not in repeats


@pytest.mark.parametrize("script", XML_FILES[1:])
def test_the_xml_tables_are_the_short_ones_and_the_container_build(script):
    result, repeats = ET.parse(ROOT / script).getroot().findall("benchmark/result")
    assert (result.findtext("use"), repeats.findtext("use")) == ("analyse", "analyse_repeats")
    container = result.find("table[@name='container']")
    assert [(c.get("title"), c.text) for c in container.iter("column")] == CONTAINER
    assert {t.get("name"): t.get("tag") for t in result.iter("table")} == {
        "result": "!container", "issues": "!container", "container": "container"}
    [table] = repeats.iter("table")
    assert (table.get("name"), table.get("tag")) == ("repeats", "repeat")
    _repeats_table([(c.get("title"), c.text) for c in table.iter("column")], table.get("filter"))
    assert result.findall("database") == repeats.findall("database") == []


def test_every_column_of_the_full_table_names_a_value_the_row_model_has(monkeypatch):
    """A column shows a field of the row or a label of its line; one with a
    source names a parameter of a JUBE file (param.<name>), a key of the
    driver's summary line (global.<key>: the row model's test lines hold
    each) or what the benchmark's data step says (data.<key>)."""
    from caraml import benchmarks
    from caraml.row import full_table
    from caraml.row.record import FIELDS, Row
    from caraml.row.render import labels
    from tests.caraml.row_packages import IMAGE_GLOBAL, LLM_GLOBAL, OPERATOR_GLOBAL

    monkeypatch.setenv(benchmarks.REGISTRY_ENV, str(ROOT / "tests" / "tiny_benchmark" / "entry.py"))
    parameters = {e.get("name") for path in [*XML_FILES, "tests/tiny_benchmark.xml"]
                  for e in ET.parse(ROOT / path).getroot().iter("parameter")}
    parameters |= {p["name"] for path in YAML_FILES for s in _yaml(path)["parameterset"]
                   for p in s.get("parameter", [])}
    keys = {w.split("=")[0] for line in (LLM_GLOBAL, IMAGE_GLOBAL, OPERATOR_GLOBAL) for w in line.split()}
    # the LLM driver's line has two more, the operator driver's four (their train_and_report)
    keys |= {"recompute", "attention",
             "data", "flops_counted_per_sample", "tflops_counted_per_device", "flops_note"}
    shown = {*FIELDS, *labels(Row())}
    unknown = []
    for entry in benchmarks.all_benchmarks():
        for column in full_table.columns(entry.name):
            kind, _, key = (column.source or "").partition(".")
            known = (column.field in shown if not column.source
                     else key in parameters if kind == "param"
                     else key in keys if kind == "global"
                     else kind == "data" and entry.data_step is not None)
            if not known:
                unknown.append(f"{entry.name}: {column.title} ({column.source or column.field})")
    assert unknown == []


def _analysed_files() -> list[tuple[str, str, str, str, str]]:
    """(script, analyser, step, file, patternsets) of every file every
    benchmark script's analysers read (the LLM scripts' are in llm_tables.yaml)."""
    found = []
    for script in [*XML_FILES[1:], "tests/tiny_benchmark.xml"]:
        for analyser in ET.parse(ROOT / script).getroot().iter("analyser"):
            for analyse in analyser.iter("analyse"):
                found += [(script, analyser.get("name"), analyse.get("step"), f.text, f.get("use"))
                          for f in analyse.iter("file")]
    for analyser in _yaml("llm_training/llm_tables.yaml")["analyser"]:
        for analyse in analyser["analyse"]:
            found += [("llm_training/llm_tables.yaml", analyser["name"], analyse["step"], f["_"], f["use"])
                      for f in analyse["file"]]
    return found


def test_a_rows_status_is_the_row_models_alone():
    """platform.xml decides nothing: its patterns read the row model's lines,
    which each step's row.out holds until the combine step prints them."""
    platform = ET.parse(ROOT / "platform.xml").getroot()
    assert [s.get("name") for s in platform.iter("patternset")] == ["rowPatterns"]
    assert all(p.text.startswith("^CARAML row") and p.get("mode") is None
               for p in platform.iter("pattern"))
    files = _analysed_files()
    read_rows = {(script, analyser, step, file) for script, analyser, step, file, use in files
                 if "rowPatterns" in use}
    steps = {(script, step) for script, analyser, step, _, _ in files if analyser == "analyse"}
    # each step's lines, and the repeat tag's repeats of each configuration
    # beside each combine step's row (caraml/row/repeat_group.py)
    assert read_rows == {(script, "analyse", step, "stdout" if step == "combine_energy" else "row.out")
                         for script, step in steps} | {
        (script, "analyse_repeats", "combine_energy", "repeats/*.out") for script, _ in steps}
    # the LLM scripts take the analysers of llm_tables.yaml
    for script in YAML_FILES:
        assert (ROOT / script).read_text().count('analyser: !include llm_tables.yaml:["analyser"]') == 1
