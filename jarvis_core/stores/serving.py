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

import fcntl
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from jarvis_core.stores.transaction import transaction

SERVING_TABLES_FILE = "tables.duckdb"
VECTORS_DIR = "vectors"
GRAPH_FILE = "graph.sqlite"
KEYWORD_DIR = "keyword"
ENCODER_DIR = "encoder"  # the exported query model (jarvis_core/text/query_model.py)
MANIFEST_FILE = "manifest.json"
KEEP_VERSIONS = 2
DOCUMENT_NAMES = r"""
    SELECT DISTINCT source, doc_key, unnest(list_concat(
        names, [lower(path), lower(source || '/' || path)],
        list_transform(list_filter(names, n -> regexp_full_match(n, '[^/\s]+/[^/\s]+#\d+')),
                       n -> split_part(n, '/', 2)))) AS name
    FROM documents"""
# Table -> the query that fills its serving copy: here the tables every kind shares; each
# kind adds its own (``SourceKind.serving``), leaving out what the query side does not read
# (the documents' text stays out: a note is read from its file, any other document rebuilt
# from its chunks).
SERVING_TABLES = {
    "chunks": "SELECT * FROM chunks",
    "documents": "SELECT * FROM documents",
    # every name a document answers to, one a row (its kind's names, its path with and without
    # its source, a GitHub issue ref without its owner): what a search's identifier lookup
    # reads, a string comparison per row instead of list functions (jarvis_query/retrievers/
    # identifiers.py)
    "document_names": DOCUMENT_NAMES,
    "ingest_failures": "SELECT * FROM ingest_failures",
    "graph_nodes": "SELECT * FROM graph_nodes",
    "graph_edges": "SELECT * FROM graph_edges",
    "graph_broken_links": "SELECT * FROM graph_broken_links",
    "chunk_mentions": "SELECT * FROM chunk_mentions",
    "unresolved_references": "SELECT * FROM unresolved_references",
    # the whole snapshot history (trends), and the per-note rows of each newest snapshot
    "analytics_snapshots": "SELECT * FROM analytics_snapshots",
    "analytics_notes": "SELECT n.* FROM analytics_notes n JOIN (SELECT source, "
                       "arg_max(snapshot_id, generated_at) AS snapshot_id "
                       "FROM analytics_snapshots GROUP BY source) USING (source, snapshot_id)",
}
# Search results are joined to their chunk rows by id, and keyword and GraphRAG results to
# their documents' chunks: indexes make those point lookups (100k chunks: 46 -> 8 ms); a
# document named by a person is looked up by name, then by key (jarvis_query/lookup.py).
SERVING_INDEXES = {"chunks_by_id": "chunks(chunk_id)", "chunks_by_doc": "chunks(doc_key)",
                   "document_names_by_name": "document_names(name)",
                   "documents_by_key": "documents(doc_key)"}


def serving_root(data_dir: Path) -> Path:
    return data_dir / "serving"


def read_copies_root(data_dir: Path) -> Path:
    """Where query processes keep their private copies of published vector shards
    (jarvis_core/stores/vectors/read_copies.py)."""
    return serving_root(data_dir) / ".read-copies"


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


class VersionDamaged(NotPublished):
    """A published version cannot be read (its manifest is missing or not JSON); the next
    refresh publishes a new one, and readers fall back to an older one meanwhile."""


STAGING_PREFIX = ".staging-"
# Lock file descriptors of the versions this process is staging: a publisher holds an
# exclusive lock on ``<staging>.lock`` until its version is committed or abandoned, so a
# staging folder whose lock is free was left by a publisher that died (a killed refresh).
_staging_locks: dict[Path, int] = {}


def begin_version(data_dir: Path) -> tuple[str, Path]:
    """A fresh, invisible staging directory for the next version; staging folders left by
    publishers that died are removed first."""
    remove_stale_staging(data_dir)
    name = f"{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:6]}"
    staging = serving_root(data_dir) / f"{STAGING_PREFIX}{name}"
    staging.parent.mkdir(parents=True, exist_ok=True)
    _staging_locks[staging] = _hold(_lock_path(staging))
    staging.mkdir()
    return name, staging


def _lock_path(staging: Path) -> Path:
    return staging.with_name(staging.name + ".lock")


def _hold(lock: Path) -> int:
    """An exclusive lock on ``lock``, on the file the path names once it is held (a cleaner
    may have removed the file between its creation and the lock)."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.fstat(fd).st_ino == os.stat(lock).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _release(staging: Path) -> None:
    fd = _staging_locks.pop(staging, None)
    _lock_path(staging).unlink(missing_ok=True)
    if fd is not None:
        os.close(fd)


def remove_stale_staging(data_dir: Path) -> list[str]:
    """Remove staging folders (and pointer files) whose publisher is gone; their names."""
    root = serving_root(data_dir)
    if not root.is_dir():
        return []
    removed = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(STAGING_PREFIX):
            staging = entry.with_name(entry.name.removesuffix(".lock"))
            if staging != entry and staging.exists():
                continue  # a lock file goes with its folder
        elif entry.name.startswith(".CURRENT-"):  # a pointer written, not yet renamed
            staging = root / f"{STAGING_PREFIX}{entry.name.removeprefix('.CURRENT-')}"
        else:
            continue
        fd = os.open(_lock_path(staging), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue  # its publisher is alive
        shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(
            missing_ok=True)
        _lock_path(staging).unlink(missing_ok=True)
        os.close(fd)
        removed.append(entry.name)
    return removed


def copy_tables(source: duckdb.DuckDBPyConnection, staging: Path,
                queries: dict[str, str], indexes: dict[str, str] | None = None) -> None:
    """Fill a new DuckDB file in ``staging``: table name -> the query over the working
    database that fills it, then ``indexes`` (index name -> "table(column)") for the
    point lookups the query side makes; one transaction, so the copy is consistent."""
    target = staging / SERVING_TABLES_FILE
    source.execute(f"ATTACH '{target}' AS serving_copy")
    try:
        with transaction(source):
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
    _release(staging)
    _prune(data_dir, keep={name})
    return PublishedVersion(name, final, manifest)


def abandon_version(staging: Path) -> None:
    shutil.rmtree(staging, ignore_errors=True)
    _release(staging)


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
    return read_version(data_dir, name)


def read_version(data_dir: Path, name: str) -> PublishedVersion:
    """A committed version by name; VersionDamaged when its manifest cannot be read."""
    path = serving_root(data_dir) / name
    try:
        manifest = json.loads((path / MANIFEST_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise VersionDamaged(f"serving version {name} has no readable {MANIFEST_FILE} "
                             f"({type(exc).__name__})") from exc
    if not isinstance(manifest, dict):
        raise VersionDamaged(f"serving version {name}: {MANIFEST_FILE} is not a JSON object")
    return PublishedVersion(name, path, manifest)


def published_names(data_dir: Path) -> list[str]:
    """The committed versions kept (``KEEP_VERSIONS``), newest first: names begin with the
    time they were published, so they sort in publication order."""
    root = serving_root(data_dir)
    if not root.is_dir():
        return []
    return sorted((entry.name for entry in root.iterdir()
                   if entry.is_dir() and not entry.name.startswith(".")), reverse=True)


def current_name(data_dir: Path) -> str | None:
    """The current version's name, read with one small file read (cheap enough per request)."""
    try:
        return current_pointer(data_dir).read_text().strip()
    except FileNotFoundError:
        return None
