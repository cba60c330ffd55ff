"""The README's word on what a user reads off a run: every exit status of
caraml-compare, each once, with its meaning in one line (a committee's
script branches on them)."""

from __future__ import annotations

from caraml.compare import comparison
from tests.docs.documented import ROOT

# every status caraml-compare exits with (caraml/compare/cli.py, comparison.py)
STATUSES = {0, comparison.SYSTEM_FAILED, comparison.BAD_INPUT, comparison.BELOW_BAND, comparison.DROPPED}


def _status_table(text: str) -> dict[int, str]:
    """The rows of the `| status | when |` table after the README's `Exit status:`."""
    block = text.split("\nExit status:\n", 1)[1].strip().split("\n\n", 1)[0]
    rows = [line.strip("|").split("|") for line in block.splitlines()[2:]]
    return {int(status): when.strip() for status, when in rows}


def test_the_readme_lists_every_exit_status_of_caraml_compare():
    listed = _status_table((ROOT / "README.md").read_text())
    assert set(listed) == STATUSES
    assert all(listed.values())
