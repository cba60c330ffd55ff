"""The README's word on what a user reads off a run: every exit status of
caraml-compare, each once, with its meaning in one line (a committee's
script branches on them)."""

from __future__ import annotations

import ast
import inspect

from caraml.compare import comparison
from tests.docs.documented import ROOT


def _statuses() -> set[int]:
    """Every status caraml-compare exits with: 0, bad input (caraml/compare/cli.py)
    and each constant the comparison's status is made of (comparison.py)."""
    tree = ast.parse(inspect.getsource(comparison))
    [status] = [node for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef) and node.name == "status"]
    named = {node.id for node in ast.walk(status) if isinstance(node, ast.Name) and node.id.isupper()}
    return {0, comparison.BAD_INPUT, *(getattr(comparison, name) for name in named)}


def _status_table(text: str) -> dict[int, str]:
    """The rows of the `| status | when |` table after the README's `Exit status:`."""
    block = text.split("\nExit status:\n", 1)[1].strip().split("\n\n", 1)[0]
    rows = [line.strip("|").split("|") for line in block.splitlines()[2:]]
    return {int(status): when.strip() for status, when in rows}


def test_the_readme_lists_every_exit_status_of_caraml_compare():
    listed = _status_table((ROOT / "README.md").read_text())
    assert set(listed) == _statuses() >= {0, 1, 2, 3, 4}
    assert all(listed.values())
