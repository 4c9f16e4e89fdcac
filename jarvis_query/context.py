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


def _rows(rows: list[dict], columns: list[str]) -> list[str]:
    widths = {c: max([len(c), *(len(str(r.get(c, ""))) for r in rows)]) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return ["  " + line.rstrip() for line in lines]


def format_vault_context(data: dict, limit: int = 10) -> str:
    """A vault context as a readable summary for the terminal."""
    summary, figures = data["summary"], data["figures"]
    freshness = ("STALE: the published graph changed since (hash "
                 f"{data['published_hash'][:12]})" if data["is_stale"] else "fresh")
    lines = [
        f"{data['vault']}: snapshot {data['snapshot_id']} of {data['generated_at'][:16]} UTC, "
        f"{freshness}{' (cached)' if data['cache_hit'] else ''}",
        f"  {summary['notes']} notes, {summary['words']:,} words, {summary['links']} links, "
        f"{summary['tags']} tags; {summary['orphans']} orphans, {summary['dead_ends']} dead "
        f"ends, {summary['broken_links']} broken links ({summary['broken_targets']} targets), "
        f"{summary['stale_notes']} stale notes; {summary['communities']} communities "
        f"(modularity {summary['modularity']:.2f}); mean quality {summary['mean_quality']:.1f}",
    ]
    if data["changes"]:
        moved = [f"{name} {value:+g}" for name, value in data["changes"].items() if value]
        lines.append("  since the previous snapshot: " + (", ".join(moved) or "no change"))
    sections = [
        ("hubs", figures["hubs"], ["degree", "links_in", "links_out", "pagerank", "path"]),
        ("communities", [{**c, "top_notes": ", ".join(p.rsplit("/", 1)[-1].removesuffix(".md")
                                                      for p in c["top_notes"]),
                          "top_tags": ", ".join(t["tag"] for t in c["top_tags"])}
                         for c in figures["communities"]],
         ["id", "size", "label", "top_tags", "top_notes"]),
        ("broken links", [{**b, "sources": ", ".join(f"{s['path']}:{s['line']}"
                                                     for s in b["sources"])}
                          for b in figures["broken_links"]],
         ["target", "reason", "count", "sources"]),
        ("stale notes", figures["stale_notes"], ["days_untouched", "links_in", "path"]),
        ("folders", figures["folders"], ["folder", "notes", "words", "links_out", "links_in",
                                         "orphans", "broken_links", "mean_quality"]),
        ("lowest quality", figures["quality"]["lowest"], ["quality", "path"]),
        ("trend", data["trend"][-limit:], ["generated_at", "notes", "links", "orphans",
                                           "dead_ends", "broken_links", "stale_notes"]),
    ]
    for title, rows, columns in sections:
        if rows:
            shown = rows if title == "folders" else rows[:limit]
            lines += ["", f"{title} ({len(rows)}):", *_rows(shown, columns)]
    for title in ("orphans", "dead_ends"):
        if figures[title]:
            lines += ["", f"{title.replace('_', ' ')} ({summary[title]}):",
                      *(f"  {path}" for path in figures[title][:limit])]
    if figures["tags"]:
        lines += ["", "tags: " + ", ".join(f"#{t['tag']} {t['notes']}"
                                           for t in figures["tags"][:limit * 2])]
    for name, value in figures["cross_source"].items():
        lines += ["", f"{name.replace('_', ' ')}: {json.dumps(value, default=str)}"]
    return "\n".join(lines)
