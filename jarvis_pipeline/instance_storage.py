"""Dagster's SQLite storages, as `jarvis refresh` writes them: connections kept, run files
copied, commits synced at checkpoints.

The stock SQLite run, event-log and schedule storages create a SQLAlchemy engine, open a
connection and close it again for every statement batch: every event of every step, each
also mirrored into the index file. Each run's new event-log file has Dagster load and run
its migration scripts; each commit waits for the disk. Here the connections are kept for the
instance's life, a run's new file is a copy of one Dagster initialised earlier in the
process, and, the files being in WAL mode, ``synchronous=NORMAL`` syncs at checkpoints (a
power cut may take back the last events; it cannot corrupt a file). Measured on the sample
vault, in process: a first refresh 5.7 s -> 4.0 s, a one-note refresh 3.9 s -> 2.1 s.
The files, schema and migrations stay Dagster's, every write is still its own committed
transaction (an idle pooled connection holds no lock, and each transaction sees what other
processes such as `jarvis ui` committed), and any Dagster process reads them as usual.

Only the in-process runs of `jarvis refresh` use these (``jarvis_pipeline.instance``), and
only with ``instance.fast_storage`` on (the default); the webserver and the daemon keep the
storages their ``dagster.yaml`` names.
"""
from __future__ import annotations

import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import ClassVar

from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool, QueuePool

# Event-log files a run writes at once: its own and the index; a few more spare.
_KEPT_SHARD_ENGINES = 8


def _kept_engine(conn_string: str) -> Engine:
    engine = create_engine(conn_string, poolclass=QueuePool,
                           connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
    event.listen(engine, "connect", _sync_at_checkpoints)
    return engine


def _sync_at_checkpoints(dbapi_connection, _record) -> None:
    """Dagster keeps its SQLite files in WAL mode; there ``synchronous=NORMAL`` syncs at
    checkpoints instead of at every commit (one per event) and cannot corrupt the file: a
    power cut may only take back the last events written."""
    (mode,) = dbapi_connection.execute("PRAGMA journal_mode").fetchone()
    if mode == "wal":
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")


def storage_overrides(home: Path) -> dict:
    """Instance settings putting these storages where Dagster's defaults keep theirs."""
    module = __name__
    return {
        "run_storage": {"module": module, "class": KeptEngineRunStorage.__name__,
                        "config": {"base_dir": str(home / "history")}},
        "event_log_storage": {"module": module, "class": KeptEngineEventLogStorage.__name__,
                              "config": {"base_dir": str(home / "history" / "runs")}},
        "schedule_storage": {"module": module, "class": KeptEngineScheduleStorage.__name__,
                             "config": {"base_dir": str(home / "schedules")}},
    }


class _KeptEngine:
    """``connect`` of Dagster's one-file SQLite storages (runs, schedules) from one engine."""

    _conn_string: str

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls.from_local(inst_data=inst_data, **config_value)

    @cached_property
    def _engine(self) -> Engine:
        return _kept_engine(self._conn_string)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        super().dispose()
        if "_engine" in self.__dict__:
            self._engine.dispose()


class KeptEngineRunStorage(_KeptEngine, SqliteRunStorage):
    pass


class KeptEngineScheduleStorage(_KeptEngine, SqliteScheduleStorage):
    pass


class KeptEngineEventLogStorage(SqliteEventLogStorage):
    """One engine per shard (a file per run plus the index), the latest few kept; a run's
    new file starts as a copy of one Dagster initialised in this process, instead of Dagster
    loading its migration scripts again for each run (0.15 s a run)."""

    _template: ClassVar[bytes | None] = None
    _template_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls(inst_data=inst_data, **config_value)

    @cached_property
    def _engines(self) -> OrderedDict[str, Engine]:
        return OrderedDict()

    @cached_property
    def _engines_lock(self) -> threading.Lock:
        return threading.Lock()

    def _shard_engine(self, shard: str) -> Engine:
        with self._engines_lock:
            engine = (self._engines.pop(shard, None)
                      or _kept_engine(self.conn_string_for_shard(shard)))
            self._engines[shard] = engine
            while len(self._engines) > _KEPT_SHARD_ENGINES:
                self._engines.popitem(last=False)[1].dispose()
            return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:  # as Dagster's: the watcher threads share the storage
            engine = self._shard_engine(shard)
            if shard not in self._initialized_dbs:
                if shard == INDEX_SHARD_NAME or not _place_copy(
                        self._shard_template(), Path(self.path_for_shard(shard))):
                    self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _shard_template(self) -> bytes:
        """One initialised run shard per process, for every instance to copy."""
        cls = KeptEngineEventLogStorage
        with cls._template_lock:
            if cls._template is None:
                cls._template = _initialized_shard(self._initdb)
            return cls._template

    def has_table(self, table_name: str) -> bool:
        engine = self._shard_engine(INDEX_SHARD_NAME)
        with engine.connect() as conn:
            return bool(engine.dialect.has_table(conn, table_name))

    def dispose(self) -> None:
        super().dispose()
        with self._engines_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()


def _initialized_shard(initdb) -> bytes:
    """The bytes of a run shard as Dagster initialises it (schema, migration stamp, WAL
    mode), checkpointed so that its one file is whole. It is made in a temporary folder
    removed at once, so a process killed later leaves nothing behind."""
    with tempfile.TemporaryDirectory(prefix="jarvis-run-shard-") as folder:
        template = Path(folder) / "run.db"
        engine = create_engine(f"sqlite:///{template}", poolclass=NullPool)
        try:
            initdb(engine)
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            engine.dispose()
        return template.read_bytes()


def _place_copy(template: bytes, path: Path) -> bool:
    """Put a copy of ``template`` at ``path`` unless a file is there; whether it was placed."""
    if path.exists():
        return False
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        staged.write_bytes(template)
        os.link(staged, path)  # fails if another process created the shard meanwhile
    except OSError:
        return False
    finally:
        staged.unlink(missing_ok=True)
    return True
