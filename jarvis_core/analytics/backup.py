"""The analytics history outside the tables file, so it survives a rebuilt one.

Everything else in the tables is rebuilt from the sources; the snapshot history is not (it
records how a vault looked on earlier days). After every snapshot the history (every
snapshot, and the note rows of each source's newest one, as the serving version keeps
them) is copied to Parquet files beside the tables; tables that hold no history (a new
file after a damaged one was moved aside) get it back when they are opened."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from jarvis_core.stores import tables
from jarvis_core.stores.serving import SERVING_TABLES

BACKUP_DIR = "backup"
HISTORY_TABLES = ("analytics_snapshots", "analytics_notes")


def backup_dir(data_dir: Path) -> Path:
    return data_dir / BACKUP_DIR


def _file(directory: Path, table: str) -> Path:
    return directory / f"{table}.parquet"


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def back_up_history(conn: duckdb.DuckDBPyConnection, directory: Path) -> None:
    """Write the history to ``directory``, each file replaced atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    for table in HISTORY_TABLES:
        target = _file(directory, table)
        partial = target.with_name(target.name + ".partial")
        conn.execute(f"COPY ({SERVING_TABLES[table]}) TO {_quoted(partial)} (FORMAT parquet)")
        os.replace(partial, target)


def restore_history(conn: duckdb.DuckDBPyConnection, directory: Path) -> int:
    """Copy the backed-up history into tables that hold none; the snapshots restored."""
    files = {table: _file(directory, table) for table in HISTORY_TABLES}
    if not all(path.is_file() for path in files.values()):
        return 0
    (held,) = conn.execute("SELECT count(*) FROM analytics_snapshots").fetchone()
    if held:
        return 0
    with tables.transaction(conn):
        for table, path in files.items():
            conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM read_parquet({_quoted(path)})")
    return conn.execute("SELECT count(*) FROM analytics_snapshots").fetchone()[0]
