"""Dagster's SQLite storages, as `jarvis refresh` writes them: connections kept, run files
copied, commits synced at checkpoints.

The stock SQLite run, event-log and schedule storages create a SQLAlchemy engine, open a
connection and close it again for every statement batch: every event of every step, each
also mirrored into the index file. Each run's new event-log file has Dagster load and run
its migration scripts; each commit waits for the disk. Here the connections are kept for the
instance's life, a run's new file is a copy of one Dagster initialised earlier in the
process, and, the files being in WAL mode, ``synchronous=NORMAL`` syncs at checkpoints (a
power cut may take back the last events; it cannot corrupt a file). Measured on the sample
vault, in process: a first refresh 5.7 s -> 4.0 s, a one-note refresh 3.9 s -> 2.1 s; a
fresh `jarvis refresh` of the whole sample after editing one note (median of 7, 2 cores
shared at load 5-9): 22.5 s (8.2 s CPU) -> 14.0 s (6.0 s CPU).
The files, schema and migrations stay Dagster's, every write is still its own committed
transaction (an idle pooled connection holds no lock, and each transaction sees what other
processes such as `jarvis ui` committed), and any Dagster process reads them as usual.

Only the in-process runs of `jarvis refresh` use these (``jarvis_pipeline.instance``), and
only with ``instance.fast_storage`` on (the default); the webserver and the daemon keep the
storages their ``dagster.yaml`` names. They override private methods of Dagster 1.13.x:
``dagster_changes`` compares the installed dagster with what they were written for, before
every use and in tests/dagster/test_dagster_private_api.py.
"""
from __future__ import annotations

import hashlib
import inspect
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import ClassVar

import dagster
from dagster._core.storage import sql as dagster_sql
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.schedules.sqlite.sqlite_schedule_storage import SqliteScheduleStorage
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool, QueuePool

# Event-log files a run writes at once: its own and the index; a few more spare.
_KEPT_SHARD_ENGINES = 8


def _kept_engine(conn_string: str) -> Engine:
    engine = dagster_sql.create_engine(conn_string, poolclass=QueuePool,
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


# What the storages below take from Dagster's private code, as dagster 1.13.27 has it.
WRITTEN_FOR_DAGSTER = "1.13"
BASES = {SqliteRunStorage: ("SqlRunStorage", "ConfigurableClass"),
         SqliteScheduleStorage: ("SqlScheduleStorage", "ConfigurableClass"),
         SqliteEventLogStorage: ("SqlEventLogStorage", "ConfigurableClass")}
# Functions the overrides call or extend, or that call them: their parameters.
SIGNATURES = {
    (dagster_sql, "create_engine"): "(url, **kwargs)",
    (SqliteRunStorage, "__init__"): "(self, conn_string, inst_data=None)",
    (SqliteRunStorage, "from_local"): "(base_dir, inst_data=None)",
    (SqliteRunStorage, "dispose"): "(self)",
    (SqliteScheduleStorage, "__init__"): "(self, conn_string, inst_data=None)",
    (SqliteScheduleStorage, "from_local"): "(base_dir, inst_data=None)",
    (SqliteScheduleStorage, "dispose"): "(self)",
    (SqliteEventLogStorage, "__init__"): "(self, base_dir, inst_data=None)",
    (SqliteEventLogStorage, "_initdb"): "(self, engine, for_index_shard=False)",
    (SqliteEventLogStorage, "conn_string_for_shard"): "(self, shard_name)",
    (SqliteEventLogStorage, "path_for_shard"): "(self, run_id)",
    (SqliteEventLogStorage, "run_connection"): "(self, run_id=None)",
    (SqliteEventLogStorage, "index_connection"): "(self)",
    (SqliteEventLogStorage, "dispose"): "(self)",
}
# Methods the overrides replace: a digest of the code they replace, which may not move
# without them (a new migration step in ``_connect`` would be skipped).
REPLACED = {
    (SqliteRunStorage, "connect"): "d343abae6e9bea85",
    (SqliteRunStorage, "from_config_value"): "747f4233d6251658",
    (SqliteScheduleStorage, "connect"): "d343abae6e9bea85",
    (SqliteScheduleStorage, "from_config_value"): "94f50800e7ca8a07",
    (SqliteEventLogStorage, "_connect"): "b8435f2665689760",
    (SqliteEventLogStorage, "has_table"): "577d801c70b2a4a5",
    (SqliteEventLogStorage, "from_config_value"): "28e08f095dc13fb2",
}
# Attributes a storage's ``__init__`` sets that the overrides read (checked on built ones).
INSTANCE_ATTRIBUTES = {SqliteRunStorage: ("_conn_string",),
                       SqliteScheduleStorage: ("_conn_string",),
                       SqliteEventLogStorage: ("_db_lock", "_initialized_dbs")}


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
        engine = dagster_sql.create_engine(f"sqlite:///{template}", poolclass=NullPool)
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


OVERRIDES = {KeptEngineRunStorage: SqliteRunStorage,
             KeptEngineScheduleStorage: SqliteScheduleStorage,
             KeptEngineEventLogStorage: SqliteEventLogStorage}


def dagster_changes() -> list[str]:
    """How the installed dagster differs from the private code the storages below were
    written for (version, base classes, signatures, replaced code, names they add); empty
    when it is the same."""
    changes = []
    if ".".join(dagster.__version__.split(".")[:2]) != WRITTEN_FOR_DAGSTER:
        changes.append(f"dagster {dagster.__version__} is not {WRITTEN_FOR_DAGSTER}.x")
    for base, names in BASES.items():
        found = tuple(parent.__name__ for parent in base.__bases__)
        if found != names:
            changes.append(f"{base.__name__} now derives from {', '.join(found)}")
    for (base, name), expected in SIGNATURES.items():
        found = _parameters(getattr(base, name, None))
        if found != expected:
            changes.append(f"{base.__name__}.{name}{found}, written for {name}{expected}")
    for (base, name), expected in REPLACED.items():
        if _code_digest(getattr(base, name, None)) != expected:
            changes.append(f"the code of {base.__name__}.{name} changed")
    for ours, base in OVERRIDES.items():
        changes += [f"{base.__name__} now has a {name} of its own, which the override hides"
                    for name in sorted(names_added(ours)) if hasattr(base, name)]
    return changes


def names_added(ours: type) -> set[str]:
    """The names a class of this module adds to the Dagster storage it derives from (those
    it replaces or extends are in the contract above)."""
    base = OVERRIDES[ours]
    contracted = {name for owner, name in (*SIGNATURES, *REPLACED) if owner is base}
    return {name for cls in ours.__mro__ if cls.__module__ == __name__
            for name in vars(cls)
            if not name.startswith("__") and name != "_abc_impl"  # ABCMeta's, on every class
            } - contracted


def _parameters(function) -> str:
    """A callable's parameters without annotations, e.g. ``(self, shard)``; ``missing``."""
    if function is None:
        return " missing"
    signature = inspect.signature(function)
    return str(signature.replace(
        parameters=[parameter.replace(annotation=parameter.empty)
                    for parameter in signature.parameters.values()],
        return_annotation=signature.empty))


def _code_digest(function) -> str | None:
    if function is None:
        return None
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]
