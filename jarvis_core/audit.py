"""The access log: every MCP tool call, resource read, prompt and CLI query, appended to a
SQLite file in WAL mode (``<data_dir>/audit.sqlite``) with a full sync per call, so a killed
process loses nothing it reported. Rows are never updated (a trigger refuses it); calls older
than ``audit.retention_days`` are deleted when a log is opened and by the memory decay.

Several processes write it at once (serving replicas, the CLI, the memory decay): each
write is one ``BEGIN IMMEDIATE`` transaction, waiting for the others' (SQLite's busy
timeout, then retries until ``WRITE_PATIENCE_SECONDS``); text SQLite cannot store as UTF-8
(a lone surrogate from a JSON ``\ud800`` escape) is stored with the character replaced, so
no argument makes a write fail. A write that still fails raises ``AuditUnavailable``: the
MCP server then withholds the call's answer (jarvis_query/mcp_assistant.py) rather than
give one the log lacks.

Each call records when, who (client, profile, transport, session), what (tool, arguments
after redaction), what it returned or read (documents as ``<source>/<path>``, or a graph key
for a node without a path), how long it took, its correlation id and its outcome. Memory
ranking counts a memory's uses here (``uses``), and performance-metrics reads durations.
"""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from jarvis_core.assistant_settings import AuditSettings

T = TypeVar("T")

AUDIT_FILE = "audit.sqlite"
REDACTED = "[redacted]"
MAX_STORED_CHARS = 2000     # an argument value longer than this is cut
MAX_ERROR_CHARS = 500
BUSY_TIMEOUT_SECONDS = 30   # SQLite's own wait for another process's transaction ...
WRITE_PATIENCE_SECONDS = 120  # ... and how long a write keeps retrying after that
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # UTC, fixed width: text order is time order
_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    client TEXT NOT NULL,
    profile TEXT NOT NULL,
    transport TEXT NOT NULL,
    session TEXT,
    correlation_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    documents TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    outcome TEXT NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS calls_at ON calls (at);
CREATE TABLE IF NOT EXISTS call_documents (
    call_id INTEGER NOT NULL,
    document TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS call_documents_document ON call_documents (document);
CREATE INDEX IF NOT EXISTS call_documents_call ON call_documents (call_id);
CREATE TRIGGER IF NOT EXISTS calls_append_only BEFORE UPDATE ON calls
BEGIN SELECT RAISE(ABORT, 'the access log is append-only'); END;
"""


def audit_path(data_dir: Path) -> Path:
    return data_dir / AUDIT_FILE


def utc_text(moment: datetime) -> str:
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).strftime(_TIME_FORMAT)


def _parse_time(text: str) -> datetime:
    return datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC)


class AuditUnavailable(RuntimeError):
    """The access log could not record a call; the message says why."""


def storable(text: str | None) -> str | None:
    """``text`` as SQLite can store it: UTF-8, a lone surrogate replaced by '?'."""
    return None if text is None else text.encode("utf-8", "replace").decode("utf-8")


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _patiently(work: Callable[[], T]) -> T:
    """``work`` retried while another process holds the log (beyond SQLite's busy timeout),
    for up to WRITE_PATIENCE_SECONDS; AuditUnavailable when it still cannot be done."""
    deadline = time.monotonic() + WRITE_PATIENCE_SECONDS
    pause = 0.05
    while True:
        try:
            return work()
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() + pause > deadline:
                raise AuditUnavailable(f"the access log could not be written: {exc}") from exc
        time.sleep(pause)
        pause = min(pause * 2, 2.0)


@dataclass
class AuditEntry:
    tool: str
    arguments: dict
    client: str
    profile: str
    transport: str            # stdio, http, cli, schedule
    correlation_id: str
    duration_ms: float
    outcome: str = "ok"       # ok or error
    error: str | None = None
    documents: list[str] = field(default_factory=list)
    session: str | None = None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


def redact(value: object, settings: AuditSettings, name: str | None = None) -> object:
    """``value`` as it may be stored: arguments named in ``redact_arguments`` hidden, matches
    of ``redact_patterns`` replaced, long strings cut; lists and mappings recursively."""
    if name is not None and name in settings.redact_arguments:
        return REDACTED
    if isinstance(value, str):
        for pattern in settings.redact_patterns:
            value = re.sub(pattern, REDACTED, value)
        return value if len(value) <= MAX_STORED_CHARS else value[:MAX_STORED_CHARS] + " …[cut]"
    if isinstance(value, Mapping):
        return {str(key): redact(item, settings, str(key)) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item, settings) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(str(value), settings)


class AuditLog:
    """One process's handle on the access log; safe to share between threads."""

    def __init__(self, path: Path, settings: AuditSettings, now: datetime | None = None) -> None:
        self.path = path
        self.settings = settings
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS,
                                     check_same_thread=False, isolation_level=None)
        try:
            _patiently(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
            self._conn.execute("PRAGMA synchronous=FULL")
            _patiently(lambda: self._conn.executescript(_SCHEMA))
            self.prune(now)
        except BaseException:
            self._conn.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def record(self, entry: AuditEntry) -> int:
        """Append one call (its arguments redacted); returns its id. AuditUnavailable when
        the log cannot take it."""
        arguments = storable(json.dumps(redact(entry.arguments, self.settings),
                                        ensure_ascii=False, sort_keys=True, default=str))
        documents = [storable(name) for name in dict.fromkeys(entry.documents)]
        error = storable(entry.error[:MAX_ERROR_CHARS]) if entry.error else None
        row = (utc_text(entry.at), storable(entry.client), storable(entry.profile),
               storable(entry.transport), storable(entry.session),
               storable(entry.correlation_id), storable(entry.tool), arguments,
               json.dumps(documents, ensure_ascii=False), round(entry.duration_ms, 3),
               storable(entry.outcome), error)

        def write(conn: sqlite3.Connection) -> int:
            call_id = conn.execute(
                "INSERT INTO calls (at, client, profile, transport, session, correlation_id,"
                " tool, arguments, documents, duration_ms, outcome, error) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row).lastrowid
            conn.executemany("INSERT INTO call_documents (call_id, document) VALUES (?, ?)",
                             [(call_id, document) for document in documents])
            return call_id

        return self._transaction(write)

    def prune(self, now: datetime | None = None) -> int:
        """Delete calls older than the retention; returns how many went."""
        cutoff = utc_text((now or datetime.now(UTC))
                          - timedelta(days=self.settings.retention_days))

        def delete(conn: sqlite3.Connection) -> int:
            conn.execute("DELETE FROM call_documents WHERE call_id IN "
                         "(SELECT id FROM calls WHERE at < ?)", (cutoff,))
            return conn.execute("DELETE FROM calls WHERE at < ?", (cutoff,)).rowcount

        return self._transaction(delete)

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one write transaction, taken at once (``BEGIN IMMEDIATE``: no
        read-to-write upgrade that another process's commit could refuse), waiting for
        other processes' transactions (``_patiently``)."""
        def attempt() -> T:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                done = work(self._conn)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            return done

        with self._lock:
            return _patiently(attempt)

    def entries(self, since: datetime | None = None, client: str | None = None,
                tool: str | None = None, profile: str | None = None,
                session: str | None = None, limit: int | None = None) -> list[dict]:
        """Calls matching every filter given, oldest first (the newest ``limit`` of them)."""
        conditions, params = _filters(since=since, client=client, tool=tool, profile=profile,
                                      session=session)
        sql = f"SELECT * FROM calls {conditions} ORDER BY id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            cursor = self._conn.execute(sql, params)
            names = [column[0] for column in cursor.description]
            rows = cursor.fetchall()
        return [_entry_dict(dict(zip(names, row, strict=True))) for row in reversed(rows)]

    def uses(self, documents: Iterable[str], profile: str | None = None) -> dict[str, int]:
        """For each document, how many successful calls returned or read it."""
        wanted = sorted(set(documents))
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        profile_sql = " AND c.profile = ?" if profile is not None else ""
        with self._lock:
            rows = self._conn.execute(
                "SELECT d.document, count(DISTINCT d.call_id) FROM call_documents d "
                "JOIN calls c ON c.id = d.call_id "
                f"WHERE d.document IN ({marks}) AND c.outcome = 'ok'{profile_sql} "
                "GROUP BY d.document",
                [*wanted, *([profile] if profile is not None else [])]).fetchall()
        return {document: 0 for document in wanted} | dict(rows)

    def tool_metrics(self, since: datetime | None = None, profile: str | None = None) -> dict:
        """Per tool: calls, errors and latency percentiles (ms) of the calls since ``since``."""
        conditions, params = _filters(since=since, profile=profile)
        with self._lock:
            rows = self._conn.execute(
                f"SELECT tool, duration_ms, outcome FROM calls {conditions}", params).fetchall()
        durations: dict[str, list[float]] = {}
        errors: dict[str, int] = {}
        for tool, duration, outcome in rows:
            durations.setdefault(tool, []).append(duration)
            errors[tool] = errors.get(tool, 0) + (outcome != "ok")
        return {tool: {"calls": len(values), "errors": errors[tool], **latency(values)}
                for tool, values in sorted(durations.items())}


def latency(values: list[float]) -> dict:
    """p50, p95, p99, mean and max of durations in ms (inclusive quantiles)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        p50 = p95 = p99 = ordered[0]
    else:
        cuts = statistics.quantiles(ordered, n=100, method="inclusive")
        p50, p95, p99 = cuts[49], cuts[94], cuts[98]
    return {"p50_ms": round(p50, 2), "p95_ms": round(p95, 2), "p99_ms": round(p99, 2),
            "mean_ms": round(statistics.fmean(ordered), 2), "max_ms": round(ordered[-1], 2)}


def _filters(**given: object) -> tuple[str, list]:
    conditions, params = [], []
    for name, value in given.items():
        if value is None:
            continue
        if name == "since":
            conditions.append("at >= ?")
            params.append(utc_text(value))
        else:
            conditions.append(f"{name} = ?")
            params.append(value)
    return ("WHERE " + " AND ".join(conditions)) if conditions else "", params


def _entry_dict(row: dict) -> dict:
    row["at"] = _parse_time(row["at"]).isoformat()
    row["arguments"] = json.loads(row["arguments"])
    row["documents"] = json.loads(row["documents"])
    return row

