"""ReFrame stays optional: only the ReFrame files (regression/) import it,
so a JUBE user never needs it installed."""

from __future__ import annotations

from pathlib import Path

from tests.test_layers import imported

REPO = Path(__file__).resolve().parents[2]
# the ReFrame files themselves, and the tests that run them
ALLOWED = (REPO / "regression", REPO / "tests" / "regression")
SOURCES = ("caraml", "jpwr", "llm_training", "image_classification", "aux", "tests", "regression")


def test_nothing_outside_the_reframe_files_imports_reframe():
    found = {str(path.relative_to(REPO)) for top in SOURCES for path in (REPO / top).rglob("*.py")
             if not any(path.is_relative_to(a) for a in ALLOWED)
             and any(name.split(".")[0] == "reframe" for name in imported(path))}
    assert found == set()


def test_the_checks_do_import_reframe():
    # the scan above sees imports: the checks' own import shows it would see one
    assert "reframe" in imported(REPO / "regression" / "checks" / "caraml_checks.py")
