"""The query side's view of the stores: the newest published serving version, reloaded
when a refresh publishes a new one, never holding a lock a refresh needs."""

from __future__ import annotations

import atexit
import os
import shutil
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from jarvis_core.config import (
    NEO4J_PASSWORD_ENV,
    NEO4J_URI_ENV,
    NEO4J_USER_ENV,
    QDRANT_API_KEY_ENV,
    JarvisConfig,
)
from jarvis_core.stores import serving
from jarvis_core.stores.graph.base import GraphStore
from jarvis_core.stores.graph.cached import CachedGraphStore
from jarvis_core.stores.graph.neo4j import Neo4jGraphStore
from jarvis_core.stores.vectors.base import VectorStore
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_core.stores.vectors.server import QdrantServerVectorStore

_READERS_DIR = ".readers"


class GraphUnavailable(RuntimeError):
    """The graph cannot be searched right now; the message says why."""


@dataclass
class Snapshot:
    """One published version, opened: its tables (read-only) and its vectors."""

    version: serving.PublishedVersion
    tables: duckdb.DuckDBPyConnection
    vectors: VectorStore
    _private_copy: Path | None = None
    _graph: GraphStore | None = None
    _graph_lock: threading.Lock = field(default_factory=threading.Lock)

    def graph(self) -> GraphStore:
        """The graph of this version, opened on first use: the published embedded copy (its
        adjacency cached in memory) or Neo4j when the version was built against it."""
        with self._graph_lock:
            if self._graph is None:
                if self.version.manifest.get("graph_backend") == "neo4j":
                    uri = os.environ.get(NEO4J_URI_ENV)
                    if not uri:
                        raise GraphUnavailable("the graph lives in Neo4j but NEO4J_URI is "
                                               "not set")
                    self._graph = Neo4jGraphStore(uri, os.environ.get(NEO4J_USER_ENV, "neo4j"),
                                                  os.environ.get(NEO4J_PASSWORD_ENV, ""))
                elif not self.version.graph_path.is_file():
                    raise GraphUnavailable(f"serving version {self.version.name} has no graph")
                else:
                    self._graph = CachedGraphStore(self.version.graph_path)
            return self._graph

    @property
    def model(self) -> str:
        return self.version.manifest["model"]

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor of its own for each request: connections are not shared across threads."""
        return self.tables.cursor()

    def close(self) -> None:
        if self._graph is not None:
            self._graph.close()
        self.vectors.close()
        self.tables.close()
        if self._private_copy:
            shutil.rmtree(self._private_copy, ignore_errors=True)


def _remove_dead_readers(root: Path) -> None:
    """Private vector copies of reader processes that died without cleaning up."""
    for directory in root.glob("*"):
        pid = directory.name.split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(directory, ignore_errors=True)


def open_snapshot(config: JarvisConfig, version: serving.PublishedVersion) -> Snapshot:
    tables = duckdb.connect(str(version.tables_path), read_only=True)
    manifest = version.manifest
    if manifest["vector_backend"] == "server":
        if not config.vectors.url:
            tables.close()
            raise serving.NotPublished(
                f"serving version {version.name} keeps its vectors on a Qdrant server, "
                "but no vectors.url / QDRANT_URL is configured")
        vectors = QdrantServerVectorStore(config.vectors.url,
                                          os.environ.get(QDRANT_API_KEY_ENV),
                                          manifest["collection"], manifest["dimension"],
                                          manifest["model"])
        return Snapshot(version, tables, vectors)
    readers = serving.serving_root(config.data_dir) / _READERS_DIR
    readers.mkdir(parents=True, exist_ok=True)
    _remove_dead_readers(readers)
    private = readers / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        vectors = EdgeVectorStore.open_read_copy(version.vectors_path, private)
    except BaseException:
        tables.close()
        shutil.rmtree(private, ignore_errors=True)
        raise
    return Snapshot(version, tables, vectors, private)


class SnapshotProvider:
    """Hands out the current snapshot; one small file read per call notices a new version.

    The snapshot replaced by a newer one stays open until the next switch, so a request
    still reading it finishes undisturbed.
    """

    def __init__(self, config: JarvisConfig):
        self.config = config
        self._snapshot: Snapshot | None = None
        self._retired: Snapshot | None = None
        self._lock = threading.Lock()
        atexit.register(self.close)

    def current(self) -> Snapshot:
        name = serving.current_name(self.config.data_dir)
        with self._lock:
            if self._snapshot is None or self._snapshot.version.name != name:
                fresh = open_snapshot(self.config, serving.current_version(self.config.data_dir))
                if self._retired is not None:
                    self._retired.close()
                self._retired, self._snapshot = self._snapshot, fresh
            return self._snapshot

    def close(self) -> None:
        with self._lock:
            for snapshot in (self._retired, self._snapshot):
                if snapshot is not None:
                    snapshot.close()
            self._snapshot = self._retired = None
