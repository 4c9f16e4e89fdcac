"""Snapshots over time: recorded, pruned, read back as a trend, and the content hash that
says whether a snapshot still matches its graph."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import duckdb

from jarvis_core.sources.references import CROSS_EXTRACTOR
from jarvis_core.stores.transaction import transaction

TREND_POINTS = 30         # snapshots a trend shows


SUMMARY_FIELDS = ("notes", "words", "links", "orphans", "dead_ends", "broken_links",
                  "stale_notes", "communities", "modularity", "mean_quality")


# Every table a figure reads, as the rows that identify it; the hash covers exactly these.
# Cross-source edges are left out: they are resolved when publishing, after the snapshot, so
# counting them would call every snapshot stale; cross-source figures read what the last
# publish resolved.
_HASHED = {
    "notes": "SELECT path || '|' || content_hash FROM notes WHERE source = $1",
    "graph_nodes": "SELECT node_key || '|' || type || '|' || coalesce(title, '') || '|' || "
                   "coalesce(properties, '') FROM graph_nodes WHERE source = $1",
    "graph_edges": "SELECT edge_key || '|' || confidence || '|' || weight FROM graph_edges "
                   f"WHERE source = $1 AND extractor <> '{CROSS_EXTRACTOR}'",
    "graph_broken_links": "SELECT origin || '|' || target || '|' || reason || '|' || line "
                          "FROM graph_broken_links WHERE source = $1",
}


_HASH_SQL = "SELECT md5(" + " || '/' || ".join(
    f"(SELECT coalesce(md5(string_agg(r, chr(10) ORDER BY r)), '') FROM ({query}) t(r))"
    for query in _HASHED.values()) + ")"


@dataclass
class AnalyticsSnapshot:
    source: str
    snapshot_id: str
    generated_at: datetime
    content_hash: str
    figures: dict
    notes: list[dict]            # per-note rows (tables.ANALYTICS_NOTES without the keys)
    compute_seconds: float

    @property
    def summary(self) -> dict:
        return {name: self.figures["totals"][name] for name in SUMMARY_FIELDS}


def graph_content_hash(conn: duckdb.DuckDBPyConnection, source: str) -> str:
    """A deterministic hash of the source's notes and graph as stored (no timestamps), the
    same over the working tables and a published copy of them."""
    return conn.execute(_HASH_SQL, [source]).fetchone()[0]


def record_snapshot(conn: duckdb.DuckDBPyConnection, snapshot: AnalyticsSnapshot,
                    keep: int) -> int:
    """Append the snapshot and its note rows, then drop the source's snapshots beyond the
    newest ``keep``, in one transaction; returns how many were dropped."""
    summary = {**snapshot.summary}
    row = {"source": snapshot.source, "snapshot_id": snapshot.snapshot_id,
           "generated_at": snapshot.generated_at, "content_hash": snapshot.content_hash,
           **summary, "compute_seconds": snapshot.compute_seconds,
           "figures": json.dumps(snapshot.figures, sort_keys=True, default=str)}
    from jarvis_core.stores import tables  # polars: only the writer needs it

    notes = tables.ANALYTICS_NOTES.frame(
        {**{k: n[k] for k in tables.ANALYTICS_NOTES.schema if k in n}, "source": snapshot.source,
         "snapshot_id": snapshot.snapshot_id} for n in snapshot.notes)
    try:
        with transaction(conn):
            conn.register("jarvis_snapshot", tables.ANALYTICS_SNAPSHOTS.frame([row]).to_arrow())
            conn.execute("INSERT INTO analytics_snapshots BY NAME SELECT * FROM jarvis_snapshot")
            if notes.height:
                conn.register("jarvis_note_rows", notes.to_arrow())
                conn.execute("INSERT INTO analytics_notes BY NAME SELECT * FROM jarvis_note_rows")
            dropped = [sid for (sid,) in conn.execute(
                "SELECT snapshot_id FROM analytics_snapshots WHERE source = ? "
                "ORDER BY generated_at DESC, snapshot_id DESC OFFSET ?",
                [snapshot.source, keep]).fetchall()]
            for table in ("analytics_snapshots", "analytics_notes"):
                conn.execute(f"DELETE FROM {table} WHERE source = ? "
                             "AND list_contains(?, snapshot_id)", [snapshot.source, dropped])
    finally:
        for view in ("jarvis_snapshot", "jarvis_note_rows"):
            try:
                conn.unregister(view)
            except duckdb.Error:
                pass
    return len(dropped)


def remove_history(conn: duckdb.DuckDBPyConnection, source: str) -> int:
    """Drop every snapshot of a source that is no longer configured; returns how many."""
    (count,) = conn.execute("SELECT count(*) FROM analytics_snapshots WHERE source = ?",
                            [source]).fetchone()
    with transaction(conn):
        for table in ("analytics_snapshots", "analytics_notes"):
            conn.execute(f"DELETE FROM {table} WHERE source = ?", [source])
    return count


def history(conn: duckdb.DuckDBPyConnection, source: str,
            limit: int = TREND_POINTS) -> list[dict]:
    """The source's newest ``limit`` snapshot summaries, oldest first."""
    columns = ", ".join(SUMMARY_FIELDS)
    cursor = conn.execute(f"""
        SELECT snapshot_id, generated_at, content_hash, {columns} FROM analytics_snapshots
        WHERE source = ? ORDER BY generated_at DESC, snapshot_id DESC LIMIT ?
    """, [source, limit])
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()][::-1]
