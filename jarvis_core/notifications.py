"""Failure notices: what broke, kept where a person will see it.

A notice is logged, stored in a small SQLite table under the data directory (WAL mode, so
the Dagster daemon, a refresh and `jarvis notifications` can all use it at once without the
DuckDB writer lock) and, when ``$JARVIS_WEBHOOK_URL`` is set, POSTed there as JSON. A
webhook that cannot be reached is recorded on the notice, never raised: telling someone
about a failure must not fail in turn.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import urllib.error
import urllib.request
from contextlib import closing
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

WEBHOOK_TIMEOUT_SECONDS = 5.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    message TEXT NOT NULL,
    job TEXT,
    run_id TEXT,
    partition TEXT,
    failed_steps TEXT NOT NULL,
    webhook TEXT
)
"""
_COLUMNS = ("id", "created_at", "kind", "title", "message", "job", "run_id", "partition",
            "failed_steps", "webhook")


@dataclass(frozen=True)
class Notice:
    kind: str
    title: str
    message: str
    job: str | None = None
    run_id: str | None = None
    partition: str | None = None
    failed_steps: list[str] = field(default_factory=list)
    created_at: str = field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(_SCHEMA)
    return conn


def post_webhook(url: str, notice: Notice) -> str:
    """POST the notice as JSON; the outcome as a short text ("200", or why it failed)."""
    request = urllib.request.Request(
        url, data=json.dumps({"source": "jarvis", **asdict(notice)}).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "jarvis-notifications"},
        method="POST")
    try:
        with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT_SECONDS) as response:
            return str(response.status)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"failed: {exc}"


def notify(path: Path, notice: Notice, webhook_url: str | None = None,
           logger: logging.Logger | None = None) -> dict:
    """Log, deliver to the webhook if one is configured, and store the notice; returns its
    row."""
    (logger or logging.getLogger("jarvis.notifications")).error(
        f"{notice.title}: {notice.message}")
    webhook = post_webhook(webhook_url, notice) if webhook_url else None
    with closing(_connect(path)) as conn, conn:
        cursor = conn.execute(
            "INSERT INTO notifications (created_at, kind, title, message, job, run_id, "
            "partition, failed_steps, webhook) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (notice.created_at, notice.kind, notice.title, notice.message, notice.job,
             notice.run_id, notice.partition, json.dumps(notice.failed_steps), webhook))
        return {**asdict(notice), "id": cursor.lastrowid, "webhook": webhook}


def recent(path: Path, limit: int = 20) -> list[dict]:
    """The newest notices first; none when nothing was ever recorded."""
    if not path.is_file():
        return []
    with closing(_connect(path)) as conn:
        rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM notifications "
                            "ORDER BY id DESC LIMIT ?", [limit]).fetchall()
    return [{**dict(zip(_COLUMNS, row)), "failed_steps": json.loads(row[8])} for row in rows]
