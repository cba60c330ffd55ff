"""docs/results.md: every energy figure in a table says whether it was
estimated or measured, in its row or in the header of its table. A row cut
off from its table (by a blank line) renders without that header."""

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results.md"
WH_FIGURE = re.compile(r"\d[\d.,]*\s*(?:k?Wh\b|images/Wh|tokens/Wh)")
SOURCE = re.compile(r"estimated|measured", re.IGNORECASE)
SEPARATOR = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+\s*$")


def tables(text):
    """Blocks of consecutive table lines, as Markdown renders them."""
    block = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            yield block
            block = []


def test_every_energy_figure_in_a_table_says_estimated_or_measured():
    unlabelled = []
    for block in tables(RESULTS.read_text()):
        # Without the separator line the first line is no header: a block
        # that lost its table renders as rows without the columns' titles.
        has_header = len(block) > 1 and SEPARATOR.match(block[1])
        header = block[0] if has_header else ""
        for row in block[2:] if has_header else block:
            if WH_FIGURE.search(row) and not (SOURCE.search(header) or SOURCE.search(row)):
                unlabelled.append(row)
    assert not unlabelled, "\n".join(unlabelled)
