"""The audit: a row is taken at its word nowhere. From a run folder or a
submission bundle (bundle.py) each row's raw evidence is read (evidence.py):
its timed iterations, losses and skipped updates, jpwr's samples and
counters, the machine and the build it ran on. Every figure the row states
is made again from it with the suite's own functions (recompute.py), held
against the plausibility bounds (bounds.py), and the row's audit state is
decided once (decide.py): audited, refused (naming each rule broken with
its evidence) or unaudited (no raw evidence: older runs, rows written by
hand). Which rows may be pooled as repeats, and which run was given twice,
follow from their identity (identity.py). caraml-check (check.py) prints
the findings; caraml-compare ranks only audited rows, and unaudited ones
under --accept-unaudited. docs/run_rules.md lists the rules."""
