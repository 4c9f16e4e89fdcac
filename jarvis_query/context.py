"""Vault context: the newest analytics snapshot of a vault, with its freshness.

A snapshot records the content hash of the graph it was computed from; the answer compares
it with the hash of the graph in the current published version (``is_stale``). Answers are
computed once per published version and vault and then served from memory (``cache_hit``):
a new version is the only event that can change them, and it is noticed by the snapshot
provider's one-file read per request — freshness without an event bus.
"""

from __future__ import annotations

import json
import threading

import duckdb

from jarvis_core.analytics.history import SUMMARY_FIELDS, graph_content_hash, history
from jarvis_query.snapshot import Snapshot


class NoSnapshot(LookupError):
    """No analytics snapshot of the vault is published yet; the message says what to do."""


def _published_tables(cursor: duckdb.DuckDBPyConnection) -> set[str]:
    return {name for (name,) in cursor.execute(
        "SELECT table_name FROM duckdb_tables()").fetchall()}


def build_vault_context(cursor: duckdb.DuckDBPyConnection, vault: str, version: str) -> dict:
    """The newest published snapshot of ``vault`` with its trend and freshness (JSON-ready)."""
    if "analytics_snapshots" not in _published_tables(cursor):
        raise NoSnapshot(f"serving version {version} holds no analytics snapshots: run "
                         "`jarvis refresh` to take one")
    trend = history(cursor, vault)
    if not trend:
        raise NoSnapshot(f"no analytics snapshot of vault '{vault}' is published yet: run "
                         f"`jarvis refresh --source {vault}`")
    newest = trend[-1]
    (figures,) = cursor.execute(
        "SELECT figures FROM analytics_snapshots WHERE source = ? AND snapshot_id = ?",
        [vault, newest["snapshot_id"]]).fetchone()
    figures = json.loads(figures)
    published_hash = graph_content_hash(cursor, vault)
    previous = trend[-2] if len(trend) > 1 else None
    return {
        "vault": vault,
        "snapshot_id": newest["snapshot_id"],
        "generated_at": newest["generated_at"].isoformat(),
        "content_hash": newest["content_hash"],
        "published_hash": published_hash,
        "is_stale": newest["content_hash"] != published_hash,
        "serving_version": version,
        "summary": {**{name: newest[name] for name in SUMMARY_FIELDS},
                    "tags": figures["totals"]["tags"],
                    "broken_targets": figures["totals"]["broken_targets"]},
        "changes": {name: round(newest[name] - previous[name], 6)
                    for name in SUMMARY_FIELDS} if previous else None,
        "trend": [{**point, "generated_at": point["generated_at"].isoformat()}
                  for point in trend],
        "figures": figures,
    }


class VaultContexts:
    """Answers per (published version, vault), each computed once; entries of versions no
    longer current are dropped when a new one is first asked for."""

    def __init__(self) -> None:
        self._answers: dict[tuple[str, str], dict] = {}
        self._lock = threading.Lock()

    def get(self, snapshot: Snapshot, vault: str) -> dict:
        key = (snapshot.version.name, vault)
        answer = self._answers.get(key)
        if answer is not None:
            return {**answer, "cache_hit": True}
        answer = build_vault_context(snapshot.cursor(), vault, snapshot.version.name)
        with self._lock:
            for stale_key in [k for k in self._answers if k[0] != key[0]]:
                del self._answers[stale_key]
            self._answers[key] = answer
        return {**answer, "cache_hit": False}
