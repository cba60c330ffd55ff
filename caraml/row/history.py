"""The results history: every row the row model decides, kept in one SQLite
file (results/caraml_rows.sqlite in the checkout, or $CARAML_HISTORY) with
typed columns, one key per run that survives moving or deleting its run
folder, and nothing ever overwritten or dropped.

JUBE's own <database> result cannot hold this (docs/compare.md says why):
the row model writes the history itself, right after row.json, through
record(). Standard library only: the login node's python3 runs it."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import uuid
from datetime import datetime, timezone
from pathlib import Path

from caraml import jube_run, report

ENV = "CARAML_HISTORY"
DEFAULT = Path(__file__).resolve().parents[2] / "results" / "caraml_rows.sqlite"
TABLE = "history"
# The file in a run folder (outpath/<id>) that holds the run's key: written
# by the run's first row, moved and deleted with the folder, never reused by
# the next run of the same id.
RUN_KEY_FILE = "caraml_run_uuid"


def _at(*keys: str):
    def get(row: dict):
        for key in keys:
            row = row.get(key) if isinstance(row, dict) else None
        return row
    return get


def _timed(field: str):
    return lambda row: _at("energy", "windows", "timed", field)(row)


def _run(field: str):
    return lambda row: _at("energy", "windows", "run", field)(row)


def _headline(field: str):
    def get(row: dict):
        window = _at("energy", "headline_window")(row) or "run"
        return _at("energy", "windows", window, field)(row)
    return get


# (column, SQLite type, where the row holds it): declared once; a column
# added later is added to the table, and a column never leaves it.
COLUMNS = [
    ("benchmark", "TEXT", _at("benchmark")),
    ("system_name", "TEXT", _at("system", "name")),
    ("system_description", "TEXT", _at("system", "description")),
    ("device_kind", "TEXT", _at("system", "device_kind")),
    ("device_unit", "TEXT", _at("system", "device_unit")),
    ("nodes", "INTEGER", _at("system", "nodes")),
    ("devices_per_node", "INTEGER", _at("system", "devices_per_node")),
    ("devices", "INTEGER", _at("system", "devices")),
    ("tdp_w", "REAL", _at("system", "tdp_w")),
    ("model", "TEXT", _at("config", "model")),
    ("precision", "TEXT", _at("config", "precision")),
    ("backend", "TEXT", _at("config", "backend")),
    ("compile", "TEXT", _at("config", "compile")),
    ("sequence_length", "INTEGER", _at("config", "sequence_length")),
    ("image_size", "INTEGER", _at("config", "image_size")),
    ("global_batch", "INTEGER", _at("config", "global_batch")),
    ("micro_batch", "INTEGER", _at("config", "micro_batch")),
    ("tp", "INTEGER", _at("config", "tp")),
    ("pp", "INTEGER", _at("config", "pp")),
    ("dp", "INTEGER", _at("config", "dp")),
    ("params", "INTEGER", _at("config", "params")),
    ("unit", "TEXT", _at("throughput", "unit")),
    ("per_s", "REAL", _at("throughput", "per_s")),
    ("per_s_per_device", "REAL", _at("throughput", "per_s_per_device")),
    ("per_s_per_node", "REAL", _at("throughput", "per_s_per_node")),
    ("per_s_median", "REAL", _at("throughput", "per_s_median")),
    ("timed_iterations", "INTEGER", _at("throughput", "iterations")),
    ("time_per_iteration_s", "REAL", _at("throughput", "time_per_iteration_s")),
    ("mfu", "REAL", _at("mfu", "value")),
    ("peak_tflops", "REAL", _at("mfu", "peak_tflops")),
    ("peak_basis", "TEXT", _at("mfu", "peak_basis")),
    ("energy_scope", "TEXT", _at("energy", "scope")),
    ("energy_estimated", "INTEGER", _at("energy", "estimated")),
    ("energy_window", "TEXT", _at("energy", "headline_window")),
    ("energy_devices", "INTEGER", _at("energy", "devices")),
    # one meaning per name, as in the tables: work per Wh is the timed
    # window's (Tokens/Wh), the whole loop's has its own columns (RunTokens/Wh)
    ("mean_power_w_per_device", "REAL", _headline("mean_power_w_per_device")),
    # a power-limit sweep's point: the watts asked for and the limit the device reported
    ("power_limit_asked_w", "REAL", _at("power_limit", "asked_w")),
    ("power_limit_reported_w", "REAL", _at("power_limit", "reported_w")),
    ("timed_wh", "REAL", _timed("wh")),
    ("timed_work_per_wh", "REAL", _timed("work_per_wh")),
    ("timed_seconds", "REAL", _timed("seconds")),
    ("run_wh", "REAL", _run("wh")),
    ("run_work_per_wh", "REAL", _run("work_per_wh")),
    ("gpu_wh", "REAL", _at("energy", "by_scope", "gpu")),
    ("status", "TEXT", _at("status", "state")),
    ("reason", "TEXT", _at("status", "reason")),
    ("flags", "TEXT", lambda row: " ".join(map(str, row.get("flags") or [])) or None),
    ("commit_id", "TEXT", _at("provenance", "commit")),
    ("clean", "INTEGER", _at("provenance", "clean")),
    ("suite_version", "TEXT", _at("provenance", "suite_version")),
    ("torch", "TEXT", _at("provenance", "torch")),
    ("date", "TEXT", _at("provenance", "date")),
    ("node_host", "TEXT", _at("provenance", "host")),
    ("work_package", "TEXT", _at("work_package")),
]
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


def _typed(kind: str, value):
    """The value as its column's type; NULL for a missing one (never '')."""
    if value is None or value == "":
        return None
    if kind == "TEXT":
        return str(value)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if kind == "INTEGER":
        return int(value) if float(value).is_integer() else None
    return float(value)


def _connect(db: Path) -> sqlite3.Connection:
    db.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(db, timeout=60)
    columns = [*KEY, *((name, kind) for name, kind, _ in COLUMNS)]
    con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (row_id INTEGER PRIMARY KEY AUTOINCREMENT, "
                + ", ".join(f"{name} {kind}" for name, kind in columns) + ")")
    have = {line[1] for line in con.execute(f"PRAGMA table_info({TABLE})")}
    for name, kind in columns:
        if name not in have:
            con.execute(f"ALTER TABLE {TABLE} ADD COLUMN {name} {kind.replace(' NOT NULL', '')}")
    return con


def write(row: dict, work: Path, db: Path) -> None:
    """One line for the row, appended: keyed by its run's UUID and this host."""
    folder = jube_run.run_above(work) or work
    line = {"run_uuid": run_uuid(folder), "host": socket.gethostname(), "run_dir": str(folder),
            "recorded_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "row_json": json.dumps(row, sort_keys=True),
            **{name: _typed(kind, get(row)) for name, kind, get in COLUMNS}}
    with _connect(db) as con:
        con.execute(f"INSERT INTO {TABLE} ({', '.join(line)}) VALUES ({', '.join('?' * len(line))})",
                    list(line.values()))
    con.close()


def record(row: dict, work: Path) -> None:
    """The row model's hook: the row into the history. The row is already in
    row.json, so a history that cannot be written (read-only checkout, full
    disk, locked file) costs one line on stderr, never the row."""
    db = path()
    try:
        write(row, work, db)
    except (OSError, sqlite3.Error) as err:
        report.error(f"{db}: the row is in row.json but not in the history ({err}); "
                     f"set {ENV} to a writable file and run the combine step again")


def read(db: Path) -> list[dict]:
    """Every line of the history, oldest first: the row as recorded and its key."""
    if not db.is_file():
        raise FileNotFoundError(db)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        lines = con.execute(f"SELECT run_uuid, host, run_dir, recorded_at, row_json FROM {TABLE} "
                            "ORDER BY recorded_at, row_id").fetchall()
    finally:
        con.close()
    return [{"run_uuid": u, "host": h, "run_dir": d, "recorded_at": t, "row": json.loads(j)}
            for u, h, d, t, j in lines]
