"""Every command of README.md, docs/*.md and jpwr/README.md has exactly one
entry in tests/docs/documented_commands.toml saying how it is checked: a
test that runs it, a recorded run (a dated section of docs/results.md or
of the benchmark's own doc that shows it), or the hardware or site it needs
with the test that runs its nearest form here. The registry names
only commands the docs still show, tests that exist and dated sections of
docs/ that show the command."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from tests.docs.documented import ROOT, documented_commands

REGISTRY = Path(__file__).with_name("documented_commands.toml")
WAYS = ("test", "recorded", "needs")


def entries():
    return tomllib.loads(REGISTRY.read_text())["command"]


def test_every_documented_command_has_an_entry():
    known = {entry["run"] for entry in entries()}
    missing = [str(c) for c in documented_commands() if c.text not in known]
    assert not missing, f"documented commands without an entry in {REGISTRY.name}:\n" + "\n".join(missing)


def test_every_entry_is_a_command_the_docs_show_once_in_the_registry():
    shown = {c.text for c in documented_commands()}
    runs = [entry["run"] for entry in entries()]
    stale = [run for run in runs if run not in shown]
    twice = sorted({run for run in runs if runs.count(run) > 1})
    assert not stale, "entries for commands no doc shows any more:\n" + "\n".join(stale)
    assert not twice, "commands with more than one entry:\n" + "\n".join(twice)


def test_each_entry_says_one_way_it_is_checked():
    wrong = []
    for entry in entries():
        ways = [way for way in WAYS if way in entry]
        extra = set(entry) - {"run", *WAYS, "proxy"}
        if len(ways) != 1 or extra or (("proxy" in entry) != ("needs" in entry)):
            wrong.append(f"{entry['run']}: {sorted(set(entry) - {'run'})}")
    assert not wrong, ("each entry has one of test, recorded or needs (with proxy):\n"
                       + "\n".join(wrong))


def _defines(node_id: str) -> bool:
    """Whether the test file defines the test of a pytest node id
    (`path::test`, `path::Class::test`, parameters in brackets allowed)."""
    path, *names = node_id.split("::")
    file = ROOT / path
    if not (file.is_file() and names and names[-1].split("[")[0].startswith("test")):
        return False
    scope = ast.parse(file.read_text()).body
    for name in (n.split("[")[0] for n in names):
        found = [node for node in scope if getattr(node, "name", None) == name]
        if not found:
            return False
        scope = getattr(found[0], "body", [])
    return True


def test_every_named_test_exists():
    absent = [f"{entry['run']}: {entry.get(key)}" for entry in entries()
              for key in ("test", "proxy") if key in entry and not _defines(entry[key])]
    assert not absent, "entries naming a test that does not exist:\n" + "\n".join(absent)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _sections(doc: Path) -> dict[str, str]:
    """A doc's sections by anchor, each its heading and text up to the next heading,
    continuation lines joined and white space collapsed."""
    sections, anchor = {}, None
    for line in doc.read_text().splitlines():
        if line.startswith("#"):
            anchor = _anchor(line.lstrip("#"))
            sections[anchor] = [line.lstrip("#")]
        elif anchor:
            sections[anchor].append(line.rstrip().removesuffix("\\"))
    return {anchor: " ".join(" ".join(lines).split()) for anchor, lines in sections.items()}


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def test_every_recorded_run_is_a_dated_section_of_the_docs_that_shows_the_command():
    """A recorded run: a section of docs/ that shows the command and the
    date it ran (results.md, or the benchmark's own doc where its figures are)."""
    wrong = []
    for entry in entries():
        if "recorded" not in entry:
            continue
        doc, _, anchor = entry["recorded"].partition("#")
        path = ROOT / doc
        sections = _sections(path) if doc.startswith("docs/") and path.is_file() else {}
        if anchor not in sections:
            wrong.append(f"{entry['run']}: no section {entry['recorded']}")
        elif " ".join(entry["run"].split()) not in sections[anchor]:
            wrong.append(f"{entry['run']}: {entry['recorded']} does not show it")
        elif not DATE.search(sections[anchor]):
            wrong.append(f"{entry['run']}: {entry['recorded']} says no date")
    assert not wrong, "\n".join(wrong)
