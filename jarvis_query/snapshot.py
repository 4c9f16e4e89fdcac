"""The query side's view of the stores: the newest published serving version, reloaded
when a refresh publishes a new one, never holding a lock a refresh needs.

A version's vectors and graph are opened on first use, so a keyword search never copies
the vector shard and nothing imports a store's client library it does not need (the
Qdrant server client and the Neo4j driver take about a second each to import).

A version that cannot be read (its manifest missing, its tables file damaged) is skipped
with a log line, and the one before it answers (two are kept): one bad file does not take
every tool down. A version published before its embeddings were done says how far they are.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

import duckdb

from jarvis_core.config import (
    NEO4J_PASSWORD_ENV,
    NEO4J_URI_ENV,
    NEO4J_USER_ENV,
    QDRANT_API_KEY_ENV,
    JarvisConfig,
)
from jarvis_core.stores import serving
from jarvis_core.stores.connections import remember_missing_pandas

if TYPE_CHECKING:
    from jarvis_core.stores.graph.base import GraphStore
    from jarvis_core.stores.vectors.base import VectorStore
    from jarvis_core.stores.vectors.filters import VectorFilter
    from jarvis_core.stores.vectors.read_copies import ReadCopy

log = logging.getLogger("jarvis.query")
RETIRED_OPEN_SECONDS = 60  # longer than any request reads a snapshot


class GraphUnavailable(RuntimeError):
    """The graph cannot be searched right now; the message says why."""


def graph_failures() -> tuple[type[BaseException], ...]:
    """The errors that mean the graph cannot be read right now. Neo4j's are among them only
    once its driver is loaded: before that, nothing can raise them."""
    failures: tuple[type[BaseException], ...] = (GraphUnavailable, OSError)
    neo4j_errors = sys.modules.get("neo4j.exceptions")
    if neo4j_errors is not None:
        failures += (neo4j_errors.DriverError, neo4j_errors.Neo4jError)
    return failures


def embeddings_progress(manifest: dict) -> dict:
    """How far a version's embeddings are: a first refresh of a large source publishes
    before every chunk has its vector (``vectors_complete`` false in the manifest)."""
    total = int(manifest.get("chunks") or 0)
    done = sum((manifest.get("vectors") or {}).values())
    complete = bool(manifest.get("vectors_complete", True))
    message = None if complete else (
        f"embeddings {min(done, total):,} of {total:,} chunks: keyword results until "
        "every chunk has its vector")
    return {"complete": complete, "done": done, "total": total, "message": message}


class Snapshot:
    """One published version, opened: its tables (read-only) at once, its vectors and its
    graph on first use."""

    def __init__(self, config: JarvisConfig, version: serving.PublishedVersion,
                 tables: duckdb.DuckDBPyConnection) -> None:
        self.config = config
        self.version = version
        self.tables = tables
        self._vectors: VectorStore | None = None
        self._read_copy: ReadCopy | None = None
        self._graph: GraphStore | None = None
        self._vectors_lock = threading.Lock()
        self._graph_lock = threading.Lock()
        self._tables: frozenset[str] | None = None
        self.skipped: list[Unreadable] = []  # newer versions that could not be read

    @property
    def model(self) -> str:
        return self.version.manifest["model"]

    @cached_property
    def embeddings(self) -> dict:
        return embeddings_progress(self.version.manifest)

    def table_names(self) -> frozenset[str]:
        """The tables the version holds (older versions lack the newer kinds' tables)."""
        if self._tables is None:
            self._tables = frozenset(name for (name,) in self.cursor().execute(
                "SELECT table_name FROM duckdb_tables()").fetchall())
        return self._tables

    @property
    def vectors(self) -> VectorStore:
        with self._vectors_lock:
            if self._vectors is None:
                self._vectors = self._open_vectors()
            return self._vectors

    def graph(self) -> GraphStore:
        """The graph of this version: the published embedded copy (its adjacency cached in
        memory) or Neo4j when the version was built against it."""
        with self._graph_lock:
            if self._graph is None:
                self._graph = self._open_graph()
            return self._graph

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for each request: connections are not shared across threads."""
        return self.tables.cursor()

    def restrict(self, filters: VectorFilter | None) -> VectorFilter | None:
        """The filters every retriever applies: as given here; a profile's snapshot narrows
        them to its sources (jarvis_query/scoped.py)."""
        return filters

    def restrict_sources(self, sources: list[str] | None) -> list[str] | None:
        """The sources a name search keeps to (see ``restrict``)."""
        return sources

    def close(self) -> None:
        with self._graph_lock, self._vectors_lock:
            if self._graph is not None:
                self._graph.close()
            if self._read_copy is not None:
                self._read_copy.close()
            elif self._vectors is not None:
                self._vectors.close()
            self.tables.close()

    def _open_vectors(self) -> VectorStore:
        manifest = self.version.manifest
        if manifest["vector_backend"] == "server":
            if not self.config.vectors.url:
                raise serving.NotPublished(
                    f"serving version {self.version.name} keeps its vectors on a Qdrant "
                    "server, but no vectors.url / QDRANT_URL is configured")
            from jarvis_core.stores.vectors.server import QdrantServerVectorStore

            return QdrantServerVectorStore(self.config.vectors.url,
                                           os.environ.get(QDRANT_API_KEY_ENV),
                                           manifest["collection"], manifest["dimension"],
                                           manifest["model"])
        from jarvis_core.stores.vectors import read_copies

        root = serving.read_copies_root(self.config.data_dir)
        read_copies.remove_unpublished(root, serving.published_names(self.config.data_dir))
        self._read_copy = read_copies.open_read_copy(root, self.version.name,
                                                     self.version.vectors_path)
        return self._read_copy.store

    def _open_graph(self) -> GraphStore:
        if self.version.manifest.get("graph_backend") == "neo4j":
            uri = os.environ.get(NEO4J_URI_ENV)
            if not uri:
                raise GraphUnavailable("the graph lives in Neo4j but NEO4J_URI is not set")
            from jarvis_core.stores.graph.neo4j import Neo4jGraphStore

            return Neo4jGraphStore(uri, os.environ.get(NEO4J_USER_ENV, "neo4j"),
                                   os.environ.get(NEO4J_PASSWORD_ENV, ""))
        if not self.version.graph_path.is_file():
            raise GraphUnavailable(f"serving version {self.version.name} has no graph")
        from jarvis_core.stores.graph.cached import CachedGraphStore

        return CachedGraphStore(self.version.graph_path)


@dataclass(frozen=True)
class Unreadable:
    """A published version that could not be opened: ``state`` is "corrupt" (a missing or
    damaged file: the next refresh publishes a new version) or "locked" (another process
    holds its tables file)."""

    version: str
    state: str
    reason: str

    def as_dict(self) -> dict:
        return {"version": self.version, "state": self.state, "reason": self.reason}


def _state(exc: BaseException) -> str:
    """"locked" when DuckDB could not take its lock on the file, else "corrupt"."""
    text = str(exc)
    return "locked" if isinstance(exc, duckdb.IOException) and "lock" in text.lower() \
        and "not a valid" not in text else "corrupt"


def open_snapshot(config: JarvisConfig, version: serving.PublishedVersion) -> Snapshot:
    """``version`` opened and checked (a damaged tables file fails here, not mid-request)."""
    remember_missing_pandas()
    tables = duckdb.connect(str(version.tables_path), read_only=True)
    try:
        tables.execute("SELECT count(*) FROM chunks").fetchone()
    except BaseException:
        tables.close()
        raise
    return Snapshot(config, version, tables)


def open_newest(config: JarvisConfig, name: str | None, skip: frozenset[str] = frozenset()
                ) -> Snapshot:
    """The version ``name`` (CURRENT), else the newest older one that can be read; the ones
    passed over are listed in ``snapshot.skipped``. NotPublished before the first publish;
    VersionDamaged when no version can be read."""
    if name is None:
        raise serving.NotPublished(
            f"nothing published under {serving.serving_root(config.data_dir)} yet: run "
            "`jarvis refresh` first")
    candidates = [name] + [older for older in serving.published_names(config.data_dir)
                           if older < name]
    skipped: list[Unreadable] = []
    for candidate in candidates:
        if candidate in skip:
            skipped.append(Unreadable(candidate, "corrupt", "failed while it was read"))
            continue
        try:
            snapshot = open_snapshot(config, serving.read_version(config.data_dir, candidate))
        except (serving.VersionDamaged, duckdb.Error, OSError) as exc:
            skipped.append(Unreadable(candidate, _state(exc), str(exc).splitlines()[0][:300]))
            continue
        for problem in skipped:
            log.warning("serving version %s is %s (%s): answering from version %s",
                        problem.version, problem.state, problem.reason, candidate)
        snapshot.skipped = skipped
        return snapshot
    first = skipped[0]
    raise serving.VersionDamaged(
        f"serving version {first.version} is {first.state} ({first.reason}) and no earlier "
        "version can be read: run `jarvis refresh` to publish a new one")


class Closable(Protocol):
    def close(self) -> None: ...


class Retired:
    """Snapshots replaced by newer ones, each kept open ``RETIRED_OPEN_SECONDS`` after it was
    replaced, so a request still reading one finishes undisturbed however many versions are
    published meanwhile (sources refreshed in parallel publish in quick succession); the
    ones retired longer ago are closed at the next switch."""

    def __init__(self) -> None:
        self._snapshots: list[tuple[Closable, float]] = []

    def retire(self, snapshot: Closable | None) -> None:
        now = time.monotonic()
        kept = []
        for old, since in self._snapshots:
            if now - since >= RETIRED_OPEN_SECONDS:
                old.close()
            else:
                kept.append((old, since))
        self._snapshots = kept + ([(snapshot, now)] if snapshot is not None else [])

    def close(self) -> None:
        for snapshot, _ in self._snapshots:
            snapshot.close()
        self._snapshots = []


class SnapshotProvider:
    """Hands out the current snapshot; one small file read per call notices a new version.

    The snapshot replaced by a newer one stays open a while (``Retired``), so a request
    still reading it finishes undisturbed. A version that cannot be read is passed over for
    the one before it until a new version is published.
    """

    def __init__(self, config: JarvisConfig):
        self.config = config
        self._snapshot: Snapshot | None = None
        self._retired = Retired()
        self._wanted: str | None = None  # the CURRENT name the snapshot answers for
        self._damaged: set[str] = set()
        self._lock = threading.Lock()
        atexit.register(self.close)

    def current(self) -> Snapshot:
        name = serving.current_name(self.config.data_dir)
        with self._lock:
            if self._snapshot is None or self._wanted != name:
                self._switch(open_newest(self.config, name, frozenset(self._damaged)), name)
            return self._snapshot

    def damaged(self, snapshot: Snapshot, exc: BaseException) -> None:
        """``snapshot`` failed while it was read: answer from an older version from now on."""
        log.warning("serving version %s failed while it was read (%s): passing it over",
                    snapshot.version.name, str(exc).splitlines()[0][:300])
        with self._lock:
            self._damaged.add(snapshot.version.name)
            self._wanted = None

    def _switch(self, fresh: Snapshot, name: str | None) -> None:
        self._retired.retire(self._snapshot)
        self._snapshot, self._wanted = fresh, name

    def close(self) -> None:
        with self._lock:
            self._retired.close()
            if self._snapshot is not None:
                self._snapshot.close()
            self._snapshot = None
