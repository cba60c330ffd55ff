"""The rows a reader is given, from run folders and bundles alike, each
with its audit: a JUBE run folder (or the latest run of an outpath, or of
each outpath in a folder; every run with all_runs) gives each row its
combine step decided (row.json) and the row the row model decides now for
a work package the combine step has not reached (which has no raw
evidence of its own); a bundle gives the rows its manifest names, read
from the bundle unpacked. caraml-check and caraml-compare read them here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from caraml import jube_run
from caraml.audit import bundle, identity
from caraml.audit.decide import UNAUDITED, Audit, audit_file
from caraml.audit.evidence import Evidence
from caraml.row import row_json
from caraml.row.record import Row
from caraml.row.run import rows_of_run, undecided


class NotARun(ValueError):
    """A path that names neither a run nor a bundle (bad input)."""


@dataclass(frozen=True)
class Source:
    """One run to read: its folder (a bundle's unpacked), the row files a
    bundle names (None: the run's own), and how messages name it."""

    run: Path
    rows: tuple[Path, ...] | None
    name: str


@contextmanager
def sources(path: Path, all_runs: bool = False) -> Iterator[list[Source]]:
    """The runs a path names, readable while the block runs (a bundle is
    unpacked for that long); NotARun, bundle.BundleError or bundle.Refused."""
    if bundle.is_bundle(path):
        with bundle.opened(path) as bundled:
            yield [Source(run.folder, run.rows, f"{path.name}:{run.name}") for run in bundled]
        return
    runs = jube_run.runs_under(path, all_runs) if path.is_dir() else []
    if not runs:
        raise NotARun(f"{path}: neither a bundle (FILE.tar.gz) nor a JUBE run folder (no {jube_run.RECORD} "
                      "in it or in a numbered folder below it); give the outpath of a `jube run` or a bundle")
    yield [Source(run, None, str(run)) for run in runs]


def _unreadable(path: Path, error: ValueError) -> Audit:
    """A row.json that cannot be read: a failed row naming the file, with no evidence."""
    link = path.parent / "execute"
    return _without_evidence(path, undecided(None, (link if link.is_dir() else path.parent).resolve(),
                                             error, str(error)), str(error))


def _without_evidence(path: Path, row: Row, why: str) -> Audit:
    ev = Evidence(path, row_json.to_dict(row), row, missing=why)
    return Audit(row, UNAUDITED, (), why, identity.of(ev), path, row.measurement)


def audits(source: Source) -> list[Audit]:
    """Every row of the run, each with its audit."""
    files = list(source.rows) if source.rows is not None else \
        sorted(source.run.glob(f"*/work/{row_json.FILE_NAME}"))
    out = []
    for path in files:
        try:
            out.append(audit_file(path))
        except ValueError as error:
            out.append(_unreadable(path, error))
    if source.rows is None:
        decided = {Path(a.row.work_package).parent.name for a in out}
        for row in rows_of_run(source.run):
            if Path(row.work_package).parent.name not in decided:
                out.append(_without_evidence(Path(row.work_package or source.run) / row_json.FILE_NAME, row,
                                             "no raw evidence: its combine step has not run (jube continue)"))
    return out
