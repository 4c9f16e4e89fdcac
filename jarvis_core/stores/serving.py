"""Published serving versions: how the query side reads while the pipeline writes.

The pipeline owns the working stores (DuckDB file, Qdrant Edge shard), each admitting one
process. After a refresh it *publishes* an immutable version directory holding a DuckDB
file with the tables the query side reads and a copy of the vector shard, then points
``serving/CURRENT`` at it with an atomic rename. Readers never touch the working stores:
they open the current version read-only (the vector shard through a private copy, since
Qdrant Edge locks its directory), notice a new CURRENT with one stat per request, and
switch without a restart. Old versions are pruned; open files stay readable on POSIX.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from jarvis_core.stores import tables

SERVING_TABLES_FILE = "tables.duckdb"
VECTORS_DIR = "vectors"
GRAPH_FILE = "graph.sqlite"
KEYWORD_DIR = "keyword"
MANIFEST_FILE = "manifest.json"
KEEP_VERSIONS = 2
# Search results are joined to their chunk rows by id, and keyword and GraphRAG results to
# their documents' chunks: indexes make those point lookups (100k chunks: 46 -> 8 ms).
# Table -> the query that fills its serving copy (note bodies stay out: read-note reads files).
SERVING_TABLES = {
    "notes": "SELECT * EXCLUDE (body) FROM notes",
    "chunks": "SELECT * FROM chunks",
    "attachments": "SELECT * FROM attachments",
    "ingest_failures": "SELECT * FROM ingest_failures",
    "graph_nodes": "SELECT * FROM graph_nodes",
    "graph_edges": "SELECT * FROM graph_edges",
    "graph_broken_links": "SELECT * FROM graph_broken_links",
    "chunk_mentions": "SELECT * FROM chunk_mentions",
    "tickets": "SELECT * EXCLUDE (text) FROM tickets",
    "commits": "SELECT * EXCLUDE (message) FROM commits",
    "repo_files": "SELECT * FROM repo_files",
    "repo_docs": "SELECT * EXCLUDE (text) FROM repo_docs",
    "unresolved_references": "SELECT * FROM unresolved_references",
    # what the repository and ticket sensors compare with (last ingested head, export hashes)
    "repo_state": "SELECT * FROM repo_state",
    "ticket_files": "SELECT * FROM ticket_files",
    # the whole snapshot history (trends), and the per-note rows of each newest snapshot
    "analytics_snapshots": "SELECT * FROM analytics_snapshots",
    "analytics_notes": "SELECT n.* FROM analytics_notes n JOIN (SELECT source, "
                       "arg_max(snapshot_id, generated_at) AS snapshot_id "
                       "FROM analytics_snapshots GROUP BY source) USING (source, snapshot_id)",
}
SERVING_INDEXES = {"chunks_by_id": "chunks(chunk_id)", "chunks_by_doc": "chunks(doc_key)"}


def serving_root(data_dir: Path) -> Path:
    return data_dir / "serving"


def current_pointer(data_dir: Path) -> Path:
    return serving_root(data_dir) / "CURRENT"


@dataclass(frozen=True)
class PublishedVersion:
    name: str
    path: Path
    manifest: dict

    @property
    def tables_path(self) -> Path:
        return self.path / SERVING_TABLES_FILE

    @property
    def vectors_path(self) -> Path:
        return self.path / VECTORS_DIR

    @property
    def graph_path(self) -> Path:
        return self.path / GRAPH_FILE

    @property
    def keyword_path(self) -> Path:
        return self.path / KEYWORD_DIR


class NotPublished(RuntimeError):
    """No serving version exists yet: the pipeline has not completed a refresh."""


def begin_version(data_dir: Path) -> tuple[str, Path]:
    """A fresh, invisible staging directory for the next version."""
    name = f"{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:6]}"
    staging = serving_root(data_dir) / f".staging-{name}"
    staging.mkdir(parents=True)
    return name, staging


def copy_tables(source: duckdb.DuckDBPyConnection, staging: Path,
                queries: dict[str, str], indexes: dict[str, str] | None = None) -> None:
    """Fill a new DuckDB file in ``staging``: table name -> the query over the working
    database that fills it, then ``indexes`` (index name -> "table(column)") for the
    point lookups the query side makes; one transaction, so the copy is consistent."""
    target = staging / SERVING_TABLES_FILE
    source.execute(f"ATTACH '{target}' AS serving_copy")
    try:
        with tables.transaction(source):
            for table, query in queries.items():
                source.execute(f"CREATE TABLE serving_copy.{table} AS {query}")
            for name, indexed in (indexes or {}).items():
                source.execute(f"CREATE INDEX {name} ON serving_copy.{indexed}")
    finally:
        source.execute("DETACH serving_copy")


def commit_version(data_dir: Path, name: str, staging: Path, manifest: dict) -> PublishedVersion:
    """Make the staged version visible atomically, then prune old versions."""
    manifest = {**manifest, "version": name,
                "published_at": datetime.now(UTC).isoformat()}
    (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    final = serving_root(data_dir) / name
    staging.rename(final)
    pointer = current_pointer(data_dir)
    temporary = pointer.with_name(f".CURRENT-{name}")
    temporary.write_text(name)
    os.replace(temporary, pointer)
    _prune(data_dir, keep={name})
    return PublishedVersion(name, final, manifest)


def abandon_version(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)


def _prune(data_dir: Path, keep: set[str]) -> None:
    root = serving_root(data_dir)
    versions = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    for old in versions[:-KEEP_VERSIONS]:
        if old.name not in keep:
            shutil.rmtree(old, ignore_errors=True)


def current_version(data_dir: Path) -> PublishedVersion:
    pointer = current_pointer(data_dir)
    try:
        name = pointer.read_text().strip()
    except FileNotFoundError as exc:
        raise NotPublished(f"nothing published under {serving_root(data_dir)} yet: "
                           "run `jarvis refresh` first") from exc
    path = serving_root(data_dir) / name
    manifest = json.loads((path / MANIFEST_FILE).read_text())
    return PublishedVersion(name, path, manifest)


def current_name(data_dir: Path) -> str | None:
    """The current version's name, read with one small file read (cheap enough per request)."""
    try:
        return current_pointer(data_dir).read_text().strip()
    except FileNotFoundError:
        return None
