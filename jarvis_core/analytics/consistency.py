"""Whether a snapshot's figures agree with each other and with the tables they were
computed from: the rules the ``snapshot_figures_consistent`` check holds them to."""

from __future__ import annotations

import json

import duckdb

from jarvis_core.analytics.figures import LIST_LIMIT
from jarvis_core.stores.tables import read_frame


def latest_snapshot(conn: duckdb.DuckDBPyConnection, source: str) -> tuple[str, str] | None:
    """(snapshot id, content hash) of the source's newest snapshot."""
    return conn.execute(
        "SELECT snapshot_id, content_hash FROM analytics_snapshots WHERE source = ? "
        "ORDER BY generated_at DESC, snapshot_id DESC LIMIT 1", [source]).fetchone()


def snapshot_problems(conn, source: str, snapshot_id: str) -> list[str]:
    """Names of the consistency rules the snapshot breaks (lists cut at LIST_LIMIT are
    compared only when complete)."""
    figures = json.loads(conn.execute(
        "SELECT figures FROM analytics_snapshots WHERE source = ? AND snapshot_id = ?",
        [source, snapshot_id]).fetchone()[0])
    totals = figures["totals"]
    rows = read_frame(conn, "SELECT * FROM analytics_notes WHERE source = ? AND "
                                  "snapshot_id = ?", [source, snapshot_id]).to_dicts()
    notes = {path for (path,) in conn.execute(
        "SELECT path FROM notes WHERE source = ?", [source]).fetchall()}
    orphans, dead_ends = set(figures["orphans"]), set(figures["dead_ends"])
    complete = {name: len(figures[name]) < LIST_LIMIT
                for name in ("communities", "folders")}
    in_communities = sum(c["size"] for c in figures["communities"])
    found = {
        "orphans are not all notes": not orphans <= notes,
        "dead ends are not all notes": not dead_ends <= notes,
        "a note is both an orphan and a dead end": bool(orphans & dead_ends),
        "per-note rows differ from the notes": {r["path"] for r in rows} != notes
        or totals["notes"] != len(notes),
        "orphan count differs from the per-note rows":
            totals["orphans"] != sum(r["orphan"] for r in rows),
        "links out and links in do not both add up to the link total":
            not totals["links"] == sum(r["links_out"] for r in rows)
            == sum(r["links_in"] for r in rows),
        "linked notes and community members differ":
            complete["communities"] and in_communities != totals["notes"] - totals["orphans"]
            or any((r["community"] >= 0) == r["orphan"] for r in rows),
        "folder note counts do not add up": complete["folders"]
            and sum(f["notes"] for f in figures["folders"]) != totals["notes"],
        "broken link count differs from the graph": totals["broken_links"] != conn.execute(
            "SELECT count(*) FROM graph_broken_links WHERE source = ?", [source]).fetchone()[0],
    }
    return [problem for problem, failed in found.items() if failed]
