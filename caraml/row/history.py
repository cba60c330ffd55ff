"""The results history: every row of a real run, measured or failed, that
the row model decides (JUBE's combine step, a ReFrame check), kept in one
SQLite file (results/caraml_rows.sqlite in the checkout, or
$CARAML_HISTORY): one typed column per field of the record, under the
field's name (caraml/row/render.py), the record itself as JSON, one key
per run that survives moving or deleting its run folder, and nothing ever
overwritten or dropped. A dry run, or a job still queued or running, is
no row of a run and is not kept.

A history made before a field was added gets its column, filled for the
lines before from their recorded row (the record reads every schema), so
a query over a column covers every line. JUBE's own <database> result
cannot hold this (docs/compare.md says why): the row model writes the
history itself, right after row.json, through record(). Standard library
only: the login node's python3 runs it."""

from __future__ import annotations

import dataclasses
import os
import socket
import sqlite3
import uuid
from datetime import datetime, timezone
from pathlib import Path

from caraml import jube_run, report
from caraml.row import render, row_json
from caraml.row.record import Row

ENV = "CARAML_HISTORY"
DEFAULT = Path(__file__).resolve().parents[2] / "results" / "caraml_rows.sqlite"
TABLE = "history"
# The file in a run folder (outpath/<id>) that holds the run's key: written
# by the run's first row, moved and deleted with the folder, never reused by
# the next run of the same id.
RUN_KEY_FILE = "caraml_run_uuid"
# the states of a row a run gives: its job ran to its figures, or failed
KEPT = ("ok", "ok-stopped-early", "failed")
# The key of a run and of its rows, then what every line has
KEY = [("run_uuid", "TEXT NOT NULL"), ("host", "TEXT NOT NULL"), ("run_dir", "TEXT"),
       ("recorded_at", "TEXT NOT NULL"), ("row_json", "TEXT NOT NULL")]


def path() -> Path:
    """$CARAML_HISTORY where it is set (the test suite sets it to a temporary file), else the checkout's."""
    given = os.environ.get(ENV)
    return Path(given) if given else DEFAULT


def run_uuid(folder: Path) -> str:
    """The run's key, made by its first row (O_EXCL: two rows at once agree on one)."""
    key_file = folder / RUN_KEY_FILE
    try:
        with open(key_file, "x") as out:
            out.write(f"{uuid.uuid4()}\n")
    except FileExistsError:
        pass
    return key_file.read_text().strip()


def _quoted(name: str) -> str:
    """A column's name as SQL takes it: some fields' names are SQL's words (commit)."""
    return f'"{name}"'


def _connect(db: Path) -> sqlite3.Connection:
    """The history, with a column for every field: one added to an older
    history is filled for its lines from their recorded rows."""
    db.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(db, timeout=60)
    columns = [*KEY, *render.history_columns()]
    con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (row_id INTEGER PRIMARY KEY AUTOINCREMENT, "
                + ", ".join(f"{_quoted(name)} {kind}" for name, kind in columns) + ")")
    have = {line[1] for line in con.execute(f"PRAGMA table_info({TABLE})")}
    added = [name for name, kind in columns if name not in have]
    for name, kind in columns:
        if name in added:
            con.execute(f"ALTER TABLE {TABLE} ADD COLUMN {_quoted(name)} {kind.replace(' NOT NULL', '')}")
    if added:
        with con:
            for row_id, text in con.execute(f"SELECT row_id, row_json FROM {TABLE}").fetchall():
                try:
                    values = render.history_values(row_json.from_json(text))
                except ValueError:  # a line whose row cannot be read keeps NULL there
                    continue
                settings = ", ".join(f"{_quoted(n)} = ?" for n in added)
                con.execute(f"UPDATE {TABLE} SET {settings} WHERE row_id = ?",
                            [values[n] for n in added] + [row_id])
    return con


def write(row: Row, work: Path, db: Path) -> None:
    """One line for the row, appended: keyed by its run's UUID and this host."""
    folder = jube_run.run_above(work) or work
    line = {"run_uuid": run_uuid(folder), "host": socket.gethostname(), "run_dir": str(folder),
            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "row_json": row_json.to_json(row), **render.history_values(row)}
    with _connect(db) as con:
        con.execute(f"INSERT INTO {TABLE} ({', '.join(map(_quoted, line))}) "
                    f"VALUES ({', '.join('?' * len(line))})", list(line.values()))
    con.close()


def record(row: Row, work: Path) -> Row:
    """The row model's hook: a row of a real run into the history (none of a
    dry run, a job not yet ended). The row is already in row.json, so a
    history that cannot be written (read-only checkout, full disk, locked
    file, a file that is no SQLite database) costs one line on stderr,
    never the row: the row comes back with history_error naming why."""
    if row.dry_run or row.state not in KEPT:
        return row
    db = path()
    try:
        write(row, work, db)
    except (OSError, sqlite3.Error) as err:
        why = f"{db}: not written ({report.one_line(str(err))}); set {ENV} to a writable file"
        report.error(f"{db}: the row is in row.json but not in the history ({err}); "
                     f"set {ENV} to a writable file and run the combine step again")
        return dataclasses.replace(row, history_error=why)
    return row


def keep(row: Row, work: Path) -> Row:
    """The decided row into row.json, then into the history; where the
    history was not written, row.json again with why (history_error), so
    that every table, the `issues` table's cause and the main command's
    exit status say it (caraml/login/rows.py). The row as kept."""
    row_json.write(row, work)
    kept = record(row, work)
    if kept != row:
        row_json.write(kept, work)
    return kept


def read(db: Path) -> list[dict]:
    """Every line of the history, oldest first: the row as recorded (ValueError
    where a line holds no row) and its key."""
    if not db.is_file():
        raise FileNotFoundError(db)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        lines = con.execute(f"SELECT run_uuid, host, run_dir, recorded_at, row_json FROM {TABLE} "
                            "ORDER BY recorded_at, row_id").fetchall()
    finally:
        con.close()
    return [{"run_uuid": u, "host": h, "run_dir": d, "recorded_at": t, "row": row_json.from_json(j)}
            for u, h, d, t, j in lines]
