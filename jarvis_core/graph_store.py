"""The graph store: typed nodes and evidence-carrying edges behind one backend-neutral interface.

Two backends behave identically: an embedded SQLite file (the default, nothing to run) and a
Neo4j server reached with the official driver. Both take a refresh as one ``apply`` batch:
the edges of every rewritten or deleted origin go, deleted notes go, the new nodes and edges
arrive, and nodes other than notes that no edge touches any more are collected. An edge must
never dangle, so a batch with an edge naming an absent node is refused and rolled back.

The query side never reads the writer's file: the pipeline publishes a consistent copy with
``SqliteGraphStore.publish_copy`` and readers open it with ``open_read_only`` (no locks, any
number of processes), or with ``CachedGraphStore``, which also holds the copy's adjacency in
memory: on the 10k-note benchmark vault (``synthetic_graph``) a depth-2 neighbourhood takes
SQLite alone ~16 ms p50 / ~23 ms p95, the cached copy ~9 ms / ~13 ms (2 cores).

Properties are JSON objects. SQLite keeps them as JSON text. Neo4j keeps the same text in
``properties_json`` (what is read back) and flattens each top-level scalar or list of strings
into a ``prop_<name>`` property, so Cypher can filter on them.
"""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import statistics
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from jarvis_core.graph_model import EXPLICIT, Edge, Node

if TYPE_CHECKING:
    import neo4j

__all__ = [
    "DEFAULT_LIMIT", "MAX_DEPTH", "MIN_DEPTH", "CachedGraphStore", "GraphNodeNotFound",
    "GraphStore", "GraphStoreReadOnly", "Neo4jGraphStore", "NodeView", "SqliteGraphStore",
    "Subgraph", "bench_neighbourhood", "graph_search", "synthetic_graph",
]

MIN_DEPTH, MAX_DEPTH = 1, 3
DEFAULT_LIMIT = 500
NOTE, TAG, LINK = "note", "tag", "link"
TAGGED = "TAGGED"
# Nodes that stand for a source's documents: they live until their document is removed,
# while every other node is garbage once no edge touches it.
DOCUMENT_TYPES = (NOTE, "commit", "repo_doc", "ticket")
_DOCUMENT_TYPES_SQL = "(" + ", ".join(f"'{t}'" for t in DOCUMENT_TYPES) + ")"

# Node types become Neo4j labels, so they are lower snake case.
_NODE_TYPE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


class GraphNodeNotFound(KeyError):
    """The node asked for is not in the graph."""


class GraphStoreReadOnly(RuntimeError):
    """A read-only store (a published copy) was asked to write."""


@dataclass(frozen=True)
class NodeView:
    """A stored node; ``distance`` is its hop count from a neighbourhood's centre (None when
    the node was looked up on its own)."""

    key: str
    type: str
    title: str
    source: str | None
    properties: dict = field(default_factory=dict, hash=False)
    distance: int | None = None

    def as_dict(self) -> dict:
        return {"key": self.key, "type": self.type, "title": self.title, "source": self.source,
                "properties": self.properties, "distance": self.distance}


@dataclass(frozen=True)
class Subgraph:
    """Nodes by (distance, type, key), edges among them by (src, relation, dst, origin,
    extractor). ``truncated``: more than ``limit`` nodes were in reach and the first kept."""

    center: str
    depth: int
    nodes: tuple[NodeView, ...]
    edges: tuple[Edge, ...]
    truncated: bool


class GraphStore(ABC):
    """One interface, identical behaviour on every backend (tests/test_graph_store_contract.py
    holds every backend to it)."""

    def apply(self, removed_origins: Iterable[str], nodes: Sequence[Node], edges: Sequence[Edge],
              removed_documents: Iterable[str] = ()) -> None:
        """One refresh batch in one transaction: delete the edges of ``removed_origins`` (the
        origins being rewritten and the deleted ones), delete the document nodes
        ``removed_documents`` with all their edges (keys of other nodes are ignored), upsert
        ``nodes`` by key, insert ``edges`` by ``Edge.key`` (idempotent), then delete every
        node other than a document (``DOCUMENT_TYPES``) that no edge touches any more.

        Raises ValueError, writing nothing, for an edge whose src or dst node would be absent,
        a node type that is not lower snake case or properties that are not a JSON object.
        """
        if isinstance(removed_origins, str) or isinstance(removed_documents, str):
            raise TypeError("removed_origins and removed_documents are collections of keys")
        nodes = list({n.key: n for n in nodes}.values())
        edges = list({e.key: e for e in edges}.values())
        for node in nodes:
            _check_node(node)
        for edge in edges:
            if not isinstance(edge.relation, str) or not edge.relation:
                raise ValueError(f"edge {edge.src} -> {edge.dst}: relation must be a name")
        self._apply(sorted(set(removed_origins)), sorted(set(removed_documents)), nodes, edges)

    def neighbourhood(self, center: str, depth: int, *, limit: int = DEFAULT_LIMIT) -> Subgraph:
        """Every node within ``depth`` undirected hops of ``center`` over edges of any type,
        with its distance, and every edge among them; past ``limit`` nodes the nearest are
        kept. Raises GraphNodeNotFound for an absent centre, ValueError for depth not 1..3."""
        if isinstance(depth, bool) or not isinstance(depth, int) \
                or not MIN_DEPTH <= depth <= MAX_DEPTH:
            raise ValueError(f"depth must be {MIN_DEPTH}..{MAX_DEPTH}, got {depth!r}")
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit!r}")
        return self._neighbourhood(center, depth, limit)

    @abstractmethod
    def node(self, key: str) -> NodeView | None: ...

    @abstractmethod
    def targets(self, sources: Iterable[str], relation: str) -> dict[str, list[NodeView]]:
        """For each source key, the nodes its ``relation`` edges point to, by key (sources
        without any are left out): the tags of notes, wherever those tags are."""

    @abstractmethod
    def counts(self) -> dict:
        """``{"nodes": {type: n}, "edges": {relation: n}}``, keys sorted."""

    @abstractmethod
    def document_keys(self, source: str | None = None) -> set[str]:
        """Keys of the document nodes (notes, commits, repo docs, tickets) of ``source``."""

    @abstractmethod
    def dangling_edges(self) -> int:
        """Edges whose src or dst is not a stored node: 0 unless something bypassed apply."""

    @abstractmethod
    def close(self) -> None:
        """Release the store; safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- backend hooks -------------------------------------------------------------------

    @abstractmethod
    def _apply(self, removed_origins: list[str], removed_documents: list[str],
               nodes: list[Node], edges: list[Edge]) -> None: ...

    @abstractmethod
    def _neighbourhood(self, center: str, depth: int, limit: int) -> Subgraph: ...


# -- shared rules ------------------------------------------------------------------------

def _check_node(node: Node) -> None:
    if not isinstance(node.key, str) or not node.key:
        raise ValueError(f"node key must be a non-empty string: {node!r}")
    if not isinstance(node.type, str) or not _NODE_TYPE.match(node.type):
        raise ValueError(f"node {node.key!r}: type must be lower snake case, got {node.type!r}")
    _properties_json(node)


def _properties_json(node: Node) -> str:
    if not isinstance(node.properties, dict):
        raise ValueError(f"node {node.key!r}: properties must be a dict")
    try:
        return json.dumps(node.properties, sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"node {node.key!r}: properties are not JSON: {error}") from error


def _dangling(edges: Iterable[Edge], missing: set[str]) -> ValueError:
    edge = next(e for e in edges if e.src in missing or e.dst in missing)
    absent = ", ".join(sorted({edge.src, edge.dst} & missing))
    return ValueError(f"edge {edge.src} -[{edge.relation}]-> {edge.dst} (origin {edge.origin}, "
                      f"key {edge.key}) names an absent node: {absent}; the batch must carry "
                      f"a node for every endpoint")


def _edge_order(edge: Edge) -> tuple:
    return edge.src, edge.relation, edge.dst, edge.origin, edge.extractor


def _batches(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


# -- SQLite --------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    key TEXT PRIMARY KEY, type TEXT NOT NULL, title TEXT NOT NULL, source TEXT,
    properties TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS edges (
    key TEXT PRIMARY KEY, src TEXT NOT NULL, dst TEXT NOT NULL, relation TEXT NOT NULL,
    confidence TEXT NOT NULL, extractor TEXT NOT NULL, origin TEXT NOT NULL,
    source TEXT NOT NULL, evidence TEXT NOT NULL, evidence_text TEXT NOT NULL,
    weight REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS edges_src ON edges (src, dst);
CREATE INDEX IF NOT EXISTS edges_dst ON edges (dst, src);
CREATE INDEX IF NOT EXISTS edges_origin ON edges (origin);
"""
# edges keeps its rowid: the (src, dst) and (dst, src) indexes then cover every hop of a
# breadth-first search, and the few rows finally wanted are fetched by integer rowid.

_NODE_COLUMNS = "key, type, title, source, properties"
_EDGE_COLUMNS = ("src, dst, relation, confidence, extractor, origin, source, evidence, "
                 "evidence_text, weight")
_IN_JSON = "(SELECT value FROM json_each(?))"  # one JSON array parameter: no variable limit

# The breadth-first search runs inside SQLite over per-connection temp tables: a hop is two
# index-only joins from the previous ring, a ring past the limit is never searched, and
# ranking, cutting at the limit and finding the edges among the kept nodes never bring a
# discarded row into Python. CROSS JOIN fixes the join order (the small temp table drives).
# Measured on the 10k-note benchmark graph (search, ranking and kept node rows, p50): this
# 8-11 ms at depth 2; `IN (...)` lists per hop from Python with ranking in Python 18 ms; a
# recursive CTE 15-17 ms at depth 2 and 120 ms at depth 3, as it cannot stop at the limit
# and its UNION dedups (key, distance) pairs, not keys.
_TEMP_TABLES = """
PRAGMA temp_store = MEMORY;
CREATE TEMP TABLE IF NOT EXISTS reach (key TEXT PRIMARY KEY, distance INTEGER NOT NULL)
    WITHOUT ROWID;
CREATE TEMP TABLE IF NOT EXISTS kept (key TEXT PRIMARY KEY, distance INTEGER NOT NULL)
    WITHOUT ROWID;
"""
_BFS_STEPS = (
    "INSERT OR IGNORE INTO temp.reach SELECT e.dst, ?1 FROM temp.reach r "
    "CROSS JOIN edges e ON e.src = r.key WHERE r.distance = ?1 - 1",
    "INSERT OR IGNORE INTO temp.reach SELECT e.src, ?1 FROM temp.reach r "
    "CROSS JOIN edges e ON e.dst = r.key WHERE r.distance = ?1 - 1",
)
_KEEP_NEAREST = ("INSERT INTO temp.kept SELECT r.key, r.distance FROM temp.reach r "
                 "CROSS JOIN nodes n ON n.key = r.key ORDER BY r.distance, n.type, n.key LIMIT ?")
_KEPT_NODES = ("SELECT n.key, n.type, n.title, n.source, n.properties, k.distance "
               "FROM temp.kept k CROSS JOIN nodes n ON n.key = k.key "
               "ORDER BY k.distance, n.type, n.key")
# Rowids first (the index covers this join), rows after: joining full rows would read every
# out-edge of every kept node before the test on dst discards most of them.
_KEPT_EDGE_ROWIDS = ("SELECT e.rowid FROM temp.kept a CROSS JOIN edges e ON e.src = a.key "
                     "CROSS JOIN temp.kept b ON b.key = e.dst")


def _json_list(values: Iterable) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def _json_texts(texts: list[str]) -> list:
    """Decode many JSON texts with one ``json.loads``: on a neighbourhood's thousand small
    documents the per-call overhead, not the parsing, is what costs."""
    return json.loads(f"[{','.join(texts)}]")


def _nodes_from_rows(rows: list[Sequence]) -> list[NodeView]:
    """Rows of key, type, title, source, properties and, optionally, distance."""
    properties = _json_texts([row[4] for row in rows])
    return [NodeView(row[0], row[1], row[2], row[3], props, row[5] if len(row) > 5 else None)
            for row, props in zip(rows, properties)]


def _edges_from_rows(rows: list[Sequence]) -> list[Edge]:
    evidence = _json_texts([row[7] for row in rows])
    edges = [Edge(src, dst, relation, confidence, extractor, origin, source, tuple(chunks),
                  text, weight)
             for (src, dst, relation, confidence, extractor, origin, source, _, text, weight),
             chunks in zip(rows, evidence)]
    edges.sort(key=_edge_order)
    return edges


class SqliteGraphStore(GraphStore):
    """The embedded default: one SQLite file in WAL mode, written by one pipeline process.

    Integrity (no dangling edge, no orphan tag) is enforced by ``apply``, not by foreign
    keys, so a batch can delete and re-add a note in any order inside its transaction."""

    def __init__(self, path: Path, *, busy_timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.read_only = False
        self._conn = sqlite3.connect(self.path, timeout=busy_timeout, isolation_level=None,
                                     check_same_thread=False)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
            self._conn.executescript(_TEMP_TABLES)
        except BaseException:
            self._conn.close()
            raise
        self._lock = threading.RLock()
        self._closed = False

    @classmethod
    def open_read_only(cls, path: Path, *, immutable: bool = True) -> SqliteGraphStore:
        """Open ``path`` for reading only. ``immutable`` (a published copy no one writes)
        skips all locking and change detection, so any number of reader processes share the
        file at no cost; pass False to follow a file a writer still changes."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no graph store at {path}")
        store = cls.__new__(cls)
        store.path = path
        store.read_only = True
        flags = "mode=ro&immutable=1" if immutable else "mode=ro"
        store._conn = sqlite3.connect(f"{path.resolve().as_uri()}?{flags}", uri=True,
                                      isolation_level=None, check_same_thread=False)
        try:
            store._conn.executescript(_TEMP_TABLES)  # temp tables live outside the file
        except BaseException:
            store._conn.close()
            raise
        store._lock = threading.RLock()
        store._closed = False
        return store

    def publish_copy(self, dest: Path) -> None:
        """Write a consistent copy to ``dest`` (which must not exist) with the backup API
        while this store stays open and writable. The copy appears atomically and uses a
        rollback journal, so it is one self-contained file for ``open_read_only``."""
        dest = Path(dest)
        if dest.exists():
            raise FileExistsError(f"publish destination already exists: {dest}")
        staging = dest.with_name(f".{dest.name}.partial-{uuid.uuid4().hex}")
        try:
            target = sqlite3.connect(staging, isolation_level=None)
            try:
                with self._lock:
                    self._require_open()
                    self._conn.backup(target)
                target.execute("PRAGMA journal_mode=DELETE")
            finally:
                target.close()
            os.replace(staging, dest)
        except BaseException:
            staging.unlink(missing_ok=True)
            raise

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def _require_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"graph store {self.path} is closed")

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """One snapshot for a multi-statement read, even while a writer commits (WAL)."""
        with self._lock:
            self._require_open()
            self._conn.execute("BEGIN")
            try:
                yield self._conn
            finally:
                self._conn.execute("COMMIT")

    # -- writes ------------------------------------------------------------------------

    def _apply(self, removed_origins: list[str], removed_documents: list[str],
               nodes: list[Node], edges: list[Edge]) -> None:
        if self.read_only:
            raise GraphStoreReadOnly(f"graph store {self.path} was opened read-only")
        with self._lock:
            self._require_open()
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                touched = self._delete_edges(f"origin IN {_IN_JSON}",
                                             (_json_list(removed_origins),))
                documents = _json_list(removed_documents)
                doomed = (f"(SELECT key FROM nodes WHERE type IN {_DOCUMENT_TYPES_SQL} "
                          f"AND key IN {_IN_JSON})")
                touched |= self._delete_edges(f"src IN {doomed} OR dst IN {doomed}",
                                              (documents, documents))
                conn.execute(f"DELETE FROM nodes WHERE type IN {_DOCUMENT_TYPES_SQL} "
                             f"AND key IN {_IN_JSON}", (documents,))
                conn.executemany(
                    f"INSERT INTO nodes ({_NODE_COLUMNS}) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET type = excluded.type, "
                    "title = excluded.title, source = excluded.source, "
                    "properties = excluded.properties",
                    [(n.key, n.type, n.title, n.source, _properties_json(n)) for n in nodes])
                self._check_endpoints(nodes, edges)
                conn.executemany(
                    f"INSERT INTO edges (key, {_EDGE_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET confidence = excluded.confidence, "
                    "source = excluded.source, evidence = excluded.evidence, "
                    "evidence_text = excluded.evidence_text, weight = excluded.weight",
                    [(e.key, e.src, e.dst, e.relation, e.confidence, e.extractor, e.origin,
                      e.source, json.dumps(list(e.evidence)), e.evidence_text, float(e.weight))
                     for e in edges])
                candidates = touched | {n.key for n in nodes if n.type not in DOCUMENT_TYPES}
                conn.execute(
                    f"DELETE FROM nodes WHERE key IN {_IN_JSON} "
                    f"AND type NOT IN {_DOCUMENT_TYPES_SQL} "
                    "AND NOT EXISTS (SELECT 1 FROM edges WHERE src = nodes.key) "
                    "AND NOT EXISTS (SELECT 1 FROM edges WHERE dst = nodes.key)",
                    (_json_list(candidates),))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _delete_edges(self, where: str, params: tuple) -> set[str]:
        """Delete the edges matching ``where``; their endpoints may have become garbage."""
        ends = self._conn.execute(f"DELETE FROM edges WHERE {where} RETURNING src, dst",
                                  params).fetchall()
        return {key for pair in ends for key in pair}

    def _check_endpoints(self, nodes: list[Node], edges: list[Edge]) -> None:
        others = {k for e in edges for k in (e.src, e.dst)} - {n.key for n in nodes}
        if not others:
            return
        present = {k for (k,) in self._conn.execute(
            f"SELECT key FROM nodes WHERE key IN {_IN_JSON}", (_json_list(others),))}
        if others - present:
            raise _dangling(edges, others - present)

    # -- reads -------------------------------------------------------------------------

    def node(self, key: str) -> NodeView | None:
        with self._lock:
            self._require_open()
            row = self._conn.execute(f"SELECT {_NODE_COLUMNS} FROM nodes WHERE key = ?",
                                     (key,)).fetchone()
        return None if row is None else _nodes_from_rows([row])[0]

    def _neighbourhood(self, center: str, depth: int, limit: int) -> Subgraph:
        with self._reading() as conn:
            if conn.execute("SELECT 1 FROM nodes WHERE key = ?", (center,)).fetchone() is None:
                raise GraphNodeNotFound(center)
            conn.execute("DELETE FROM temp.reach")
            conn.execute("DELETE FROM temp.kept")
            conn.execute("INSERT INTO temp.reach VALUES (?, 0)", (center,))
            reached = 1
            for distance in range(1, depth + 1):
                if reached > limit:  # the next ring would rank after every node kept
                    break
                for step in _BFS_STEPS:
                    reached += conn.execute(step, (distance,)).rowcount
            conn.execute(_KEEP_NEAREST, (limit,))
            nodes = _nodes_from_rows(conn.execute(_KEPT_NODES).fetchall())
            edges = self._edges_by_rowid(conn, (r for (r,) in conn.execute(_KEPT_EDGE_ROWIDS)))
        return Subgraph(center, depth, tuple(nodes), tuple(edges), reached > limit)

    @staticmethod
    def _edges_by_rowid(conn: sqlite3.Connection, rowids: Iterable[int]) -> list[Edge]:
        return _edges_from_rows(conn.execute(
            f"SELECT {_EDGE_COLUMNS} FROM edges WHERE rowid IN {_IN_JSON}",
            (_json_list(rowids),)).fetchall())

    def targets(self, sources: Iterable[str], relation: str) -> dict[str, list[NodeView]]:
        found: dict[str, list[NodeView]] = defaultdict(list)
        with self._lock:
            self._require_open()
            rows = self._conn.execute(
                "SELECT DISTINCT e.src, n.key, n.type, n.title, n.source, n.properties "
                "FROM edges e JOIN nodes n ON n.key = e.dst "
                f"WHERE e.src IN {_IN_JSON} AND e.relation = ? ORDER BY e.src, n.key",
                (_json_list(set(sources)), relation)).fetchall()
        for row, node in zip(rows, _nodes_from_rows([row[1:] for row in rows])):
            found[row[0]].append(node)
        return dict(found)

    def counts(self) -> dict:
        with self._reading() as conn:
            nodes = conn.execute("SELECT type, count(*) FROM nodes GROUP BY type ORDER BY type")
            nodes = dict(nodes.fetchall())
            edges = conn.execute(
                "SELECT relation, count(*) FROM edges GROUP BY relation ORDER BY relation")
            return {"nodes": nodes, "edges": dict(edges.fetchall())}

    def document_keys(self, source: str | None = None) -> set[str]:
        with self._lock:
            self._require_open()
            rows = self._conn.execute(
                f"SELECT key FROM nodes WHERE type IN {_DOCUMENT_TYPES_SQL} "
                "AND (?1 IS NULL OR source = ?1)", (source,)).fetchall()
        return {key for (key,) in rows}

    def dangling_edges(self) -> int:
        with self._lock:
            self._require_open()
            (count,) = self._conn.execute(
                "SELECT count(*) FROM edges e "
                "WHERE NOT EXISTS (SELECT 1 FROM nodes WHERE key = e.src) "
                "OR NOT EXISTS (SELECT 1 FROM nodes WHERE key = e.dst)").fetchone()
        return count


class CachedGraphStore(GraphStore):
    """A published copy opened read-only, its adjacency held in memory for ``neighbourhood``.

    Most of a depth-2 query in SQLite goes to writing, into temp tables, and ranking the
    thousands of nodes a hub note or a popular tag brings into reach; here the search and the
    ranking run over integer ids (numbered in (type, key) order, so ranking is a plain sort)
    and only the kept edges are read from the file; nodes are read once and kept (tags of the
    notes in reach come from the same cache). The copy never changes, so the cache never goes
    stale. Memory: ~150 bytes per edge of topology, loaded in ~0.3 s for 93k edges, plus the
    nodes read so far."""

    def __init__(self, path: Path) -> None:
        self._store = SqliteGraphStore.open_read_only(path, immutable=True)
        try:
            with self._store._reading() as conn:
                self._keys = [key for (key,) in conn.execute(
                    "SELECT key FROM nodes ORDER BY type, key")]
                self._ids = {key: number for number, key in enumerate(self._keys)}
                neighbours: list[set[int]] = [set() for _ in self._keys]
                out: list[list[tuple[int, int, str]]] = [[] for _ in self._keys]
                relations: dict[str, str] = {}  # one string object per relation name
                for rowid, src, dst, relation in conn.execute(
                        "SELECT rowid, src, dst, relation FROM edges"):
                    a, b = self._ids[src], self._ids[dst]
                    neighbours[a].add(b)
                    neighbours[b].add(a)
                    out[a].append((b, rowid, relations.setdefault(relation, relation)))
        except BaseException:
            self._store.close()
            raise
        self._neighbours = [tuple(n) for n in neighbours]
        self._out = [tuple(o) for o in out]
        self._views: dict[int, NodeView] = {}  # nodes read so far; the copy never changes
        self._views_lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._store.path

    def _apply(self, removed_origins: list[str], removed_documents: list[str],
               nodes: list[Node], edges: list[Edge]) -> None:
        raise GraphStoreReadOnly(f"graph store {self.path} is a read-only cached copy")

    def _neighbourhood(self, center: str, depth: int, limit: int) -> Subgraph:
        start = self._ids.get(center)
        if start is None:
            raise GraphNodeNotFound(center)
        rings, seen, reached = [[start]], {start}, 1
        while len(rings) <= depth and reached <= limit:
            ring = []
            for node in rings[-1]:
                for other in self._neighbours[node]:
                    if other not in seen:
                        seen.add(other)
                        ring.append(other)
            if not ring:
                break
            rings.append(ring)
            reached += len(ring)
        kept: list[tuple[int, int]] = []
        for distance, ring in enumerate(rings):
            kept += [(node, distance) for node in sorted(ring)[:limit - len(kept)]]
        members = {node for node, _ in kept}
        rowids = [rowid for node in members for other, rowid, _ in self._out[node]
                  if other in members]
        views = self._node_views(members)
        with self._store._reading() as conn:
            edges = self._store._edges_by_rowid(conn, rowids)
        nodes = [replace(views[node], distance=distance) for node, distance in kept]
        return Subgraph(center, depth, tuple(nodes), tuple(edges), reached > limit)

    def node(self, key: str) -> NodeView | None:
        return self._store.node(key)

    def targets(self, sources: Iterable[str], relation: str) -> dict[str, list[NodeView]]:
        """From the in-memory adjacency; only target nodes not read before hit the file (a
        neighbourhood's hundreds of notes share a few hundred tags)."""
        wanted: dict[str, list[int]] = {}
        for key in set(sources):
            node = self._ids.get(key)
            if node is not None:
                found = {other for other, _, name in self._out[node] if name == relation}
                if found:
                    wanted[key] = sorted(found, key=self._keys.__getitem__)
        views = self._node_views({node for found in wanted.values() for node in found})
        return {key: [views[node] for node in found] for key, found in wanted.items()}

    def _node_views(self, nodes: set[int]) -> dict[int, NodeView]:
        with self._views_lock:
            missing = [self._keys[node] for node in nodes if node not in self._views]
            if missing:
                with self._store._reading() as conn:
                    rows = conn.execute(f"SELECT {_NODE_COLUMNS} FROM nodes WHERE key IN "
                                        f"{_IN_JSON}", (_json_list(missing),)).fetchall()
                for view in _nodes_from_rows(rows):
                    self._views[self._ids[view.key]] = view
            return {node: self._views[node] for node in nodes}

    def counts(self) -> dict:
        return self._store.counts()

    def document_keys(self, source: str | None = None) -> set[str]:
        return self._store.document_keys(source)

    def dangling_edges(self) -> int:
        return self._store.dangling_edges()

    def close(self) -> None:
        self._store.close()


# -- Neo4j ---------------------------------------------------------------------------------

NEO4J_BATCH = 1000
_KEY_CONSTRAINT = "jarvis_node_key"


def _label(node_type: str) -> str:
    """``note`` -> ``Note``, ``some_type`` -> ``SomeType``: the type label of a node."""
    return re.sub(r"[^A-Za-z0-9]", "", "".join(p.capitalize() for p in node_type.split("_"))) \
        or "Untyped"


_OWN_RELATIONSHIP_TYPE = re.compile(r"[A-Z][A-Z0-9_]*")  # what _relationship_type makes


def _relationship_type(relation: str) -> str:
    """A relation as a Neo4j relationship type: upper case, [A-Z0-9_], starting with a letter
    (the exact relation is also stored, and read back, as the ``relation`` property)."""
    name = re.sub(r"[^A-Z0-9_]", "_", relation.upper())
    return name if _OWN_RELATIONSHIP_TYPE.fullmatch(name) else f"R_{name}"


def _neo4j_node(node: Node) -> dict:
    properties: dict[str, Any] = {
        f"prop_{name}": value for name, value in node.properties.items()
        if _neo4j_scalar(value)
        or (isinstance(value, list) and value and all(isinstance(v, str) for v in value))}
    properties.update(key=node.key, type=node.type, title=node.title,
                      properties_json=_properties_json(node))
    if node.source is not None:
        properties["source"] = node.source
    return {"key": node.key, "properties": properties}


def _neo4j_scalar(value: object) -> bool:
    if isinstance(value, bool | str | float):
        return True
    return isinstance(value, int) and -2 ** 63 <= value < 2 ** 63


def _neo4j_edge(edge: Edge) -> dict:
    return {"src": edge.src, "dst": edge.dst, "key": edge.key, "properties": {
        "key": edge.key, "relation": edge.relation, "confidence": edge.confidence,
        "extractor": edge.extractor, "origin": edge.origin, "source": edge.source,
        "evidence": list(edge.evidence), "evidence_text": edge.evidence_text,
        "weight": float(edge.weight)}}


_NODE_RETURN = ("{k}.key AS key, {k}.type AS type, {k}.title AS title, {k}.source AS source, "
                "{k}.properties_json AS properties")
_EDGE_RETURN = ("a.key AS src, b.key AS dst, r.relation AS relation, "
                "r.confidence AS confidence, r.extractor AS extractor, r.origin AS origin, "
                "r.source AS source, r.evidence AS evidence, r.evidence_text AS evidence_text, "
                "r.weight AS weight")


def _node_from_record(record: Any, distance: int | None = None) -> NodeView:
    return NodeView(record["key"], record["type"], record["title"], record["source"],
                    json.loads(record["properties"]), distance)


def _edge_from_record(record: Any) -> Edge:
    return Edge(record["src"], record["dst"], record["relation"], record["confidence"],
                record["extractor"], record["origin"], record["source"],
                tuple(record["evidence"] or ()), record["evidence_text"], float(record["weight"]))


class Neo4jGraphStore(GraphStore):
    """A Neo4j database (Jarvis's own: use ``database`` to keep it apart from other data).

    Every node has the label ``Node`` (unique ``key``) plus its type label (``Note``, ``Tag``
    ...). An edge is a relationship whose type is its relation made safe for Cypher, carrying
    key, relation, origin, source, confidence, extractor, evidence (list of chunk ids),
    evidence_text and weight. Deleting by origin probes one range index on ``origin`` per
    relationship type (Neo4j indexes relationship properties per type), created on first use.
    Garbage collection tests only the nodes the batch touched, so it costs the batch, not the
    graph. ``apply`` is one managed write transaction; rows go in UNWIND batches of
    ``batch_size``. Needs Neo4j 4.4 or later (``CREATE CONSTRAINT ... REQUIRE``).
    """

    def __init__(self, uri: str, user: str, password: str, database: str | None = None, *,
                 batch_size: int = NEO4J_BATCH) -> None:
        import neo4j  # only Neo4j users pay for the driver's import

        self.database = database
        self.batch_size = batch_size
        self._read = neo4j.RoutingControl.READ
        self._driver = neo4j.GraphDatabase.driver(uri, auth=(user, password))
        self._closed = False
        self._indexed_types: set[str] = set()
        try:
            self._driver.verify_connectivity()
            self._schema(f"CREATE CONSTRAINT {_KEY_CONSTRAINT} IF NOT EXISTS "
                         "FOR (n:Node) REQUIRE n.key IS UNIQUE")
        except BaseException:
            self._driver.close()
            raise

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._driver.close()

    def _session(self) -> neo4j.Session:
        return self._driver.session(database=self.database)

    def _schema(self, statement: str) -> None:
        """Schema commands run in their own auto-commit transaction, never beside writes."""
        with self._session() as session:
            session.run(statement).consume()

    def _query(self, statement: str, **parameters: Any) -> list:
        records, _, _ = self._driver.execute_query(statement, parameters, routing_=self._read,
                                                   database_=self.database)
        return records

    # -- writes ------------------------------------------------------------------------

    def _apply(self, removed_origins: list[str], removed_documents: list[str],
               nodes: list[Node], edges: list[Edge]) -> None:
        for rel_type in sorted({_relationship_type(e.relation) for e in edges}
                               - self._indexed_types):
            self._schema(f"CREATE INDEX jarvis_origin_{rel_type} IF NOT EXISTS "
                         f"FOR ()-[r:`{rel_type}`]-() ON (r.origin)")
            self._indexed_types.add(rel_type)
        with self._session() as session:
            session.execute_write(self._write, removed_origins, removed_documents, nodes, edges)

    def _write(self, tx: neo4j.ManagedTransaction, removed_origins: list[str],
               removed_documents: list[str], nodes: list[Node], edges: list[Edge]) -> None:
        """The whole batch; the driver re-runs it from the start on a transient error."""
        touched: set[str] = set()
        if removed_origins:
            rel_types = tx.run("CALL db.relationshipTypes() YIELD relationshipType "
                               "RETURN relationshipType").value()
            for rel_type in filter(_OWN_RELATIONSHIP_TYPE.fullmatch, rel_types):
                for origins in _batches(removed_origins, self.batch_size):
                    for ends in tx.run(
                            "UNWIND $origins AS origin "
                            f"MATCH (a:Node)-[r:`{rel_type}` {{origin: origin}}]->(b:Node) "
                            "DELETE r RETURN a.key AS src, b.key AS dst", origins=origins):
                        touched.update((ends["src"], ends["dst"]))
        for keys in _batches(removed_documents, self.batch_size):
            touched.update(r["key"] for r in tx.run(
                "UNWIND $keys AS k MATCH (n:Node {key: k})--(m:Node) WHERE n.type IN $documents "
                "RETURN DISTINCT m.key AS key", keys=keys, documents=DOCUMENT_TYPES))
            tx.run("UNWIND $keys AS k MATCH (n:Node {key: k}) WHERE n.type IN $documents "
                   "DETACH DELETE n", keys=keys, documents=DOCUMENT_TYPES).consume()
        self._upsert_nodes(tx, nodes)
        self._check_endpoints(tx, nodes, edges)
        by_type: dict[str, list[dict]] = defaultdict(list)
        for edge in edges:
            by_type[_relationship_type(edge.relation)].append(_neo4j_edge(edge))
        for rel_type, rows in sorted(by_type.items()):
            for batch in _batches(rows, self.batch_size):
                tx.run("UNWIND $rows AS row "
                       "MATCH (a:Node {key: row.src}) MATCH (b:Node {key: row.dst}) "
                       f"MERGE (a)-[r:`{rel_type}` {{key: row.key}}]->(b) "
                       "SET r = row.properties", rows=batch).consume()
        candidates = sorted(touched | {n.key for n in nodes if n.type not in DOCUMENT_TYPES})
        for keys in _batches(candidates, self.batch_size):
            tx.run("UNWIND $keys AS k MATCH (n:Node {key: k}) "
                   "WHERE NOT n.type IN $documents AND NOT EXISTS { MATCH (n)--() } DELETE n",
                   keys=keys, documents=DOCUMENT_TYPES).consume()

    def _upsert_nodes(self, tx: neo4j.ManagedTransaction, nodes: list[Node]) -> None:
        """Replace each node's properties and type label (dropping the old one on a change)."""
        retyped: dict[str, list[str]] = defaultdict(list)
        for batch in _batches(nodes, self.batch_size):
            for record in tx.run(
                    "UNWIND $rows AS row MATCH (n:Node {key: row.key}) "
                    "WHERE n.type <> row.type RETURN n.key AS key, n.type AS type",
                    rows=[{"key": n.key, "type": n.type} for n in batch]):
                retyped[_label(record["type"])].append(record["key"])
        for label, keys in sorted(retyped.items()):
            for batch in _batches(keys, self.batch_size):
                tx.run(f"UNWIND $keys AS k MATCH (n:Node {{key: k}}) REMOVE n:`{label}`",
                       keys=batch).consume()
        by_label: dict[str, list[dict]] = defaultdict(list)
        for node in nodes:
            by_label[_label(node.type)].append(_neo4j_node(node))
        for label, rows in sorted(by_label.items()):
            for batch in _batches(rows, self.batch_size):
                tx.run("UNWIND $rows AS row MERGE (n:Node {key: row.key}) "
                       f"SET n = row.properties, n:`{label}`", rows=batch).consume()

    def _check_endpoints(self, tx: neo4j.ManagedTransaction, nodes: list[Node],
                         edges: list[Edge]) -> None:
        others = sorted({k for e in edges for k in (e.src, e.dst)} - {n.key for n in nodes})
        present: set[str] = set()
        for keys in _batches(others, self.batch_size):
            present.update(r["key"] for r in tx.run(
                "UNWIND $keys AS k MATCH (n:Node {key: k}) RETURN n.key AS key", keys=keys))
        if set(others) - present:
            raise _dangling(edges, set(others) - present)

    # -- reads -------------------------------------------------------------------------

    def node(self, key: str) -> NodeView | None:
        records = self._query(f"MATCH (n:Node {{key: $key}}) RETURN {_NODE_RETURN.format(k='n')}",
                              key=key)
        return _node_from_record(records[0]) if records else None

    def _neighbourhood(self, center: str, depth: int, limit: int) -> Subgraph:
        with self._session() as session:
            return session.execute_read(self._read_neighbourhood, center, depth, limit)

    def _read_neighbourhood(self, tx: neo4j.ManagedTransaction, center: str, depth: int,
                            limit: int) -> Subgraph:
        """Ring by ring with bounded variable-length patterns: ``RETURN DISTINCT`` lets Neo4j
        prune paths to nodes already found, and a ring past the limit is never searched."""
        if tx.run("MATCH (c:Node {key: $center}) RETURN c.key AS key",
                  center=center).single() is None:
            raise GraphNodeNotFound(center)
        distances = {center: 0}
        for distance in range(1, depth + 1):
            if len(distances) > limit:
                break
            for record in tx.run(f"MATCH (:Node {{key: $center}})-[*1..{distance}]-(n:Node) "
                                 "RETURN DISTINCT n.key AS key", center=center):
                distances.setdefault(record["key"], distance)
        types = {r["key"]: r["type"] for r in tx.run(
            "UNWIND $keys AS k MATCH (n:Node {key: k}) RETURN n.key AS key, n.type AS type",
            keys=list(distances))}
        kept = sorted(distances, key=lambda k: (distances[k], types[k], k))[:limit]
        rows = {r["key"]: r for r in tx.run(
            f"UNWIND $keys AS k MATCH (n:Node {{key: k}}) RETURN {_NODE_RETURN.format(k='n')}",
            keys=kept)}
        edges = sorted((_edge_from_record(r) for r in tx.run(
            f"UNWIND $keys AS k MATCH (a:Node {{key: k}})-[r]->(b:Node) "
            f"WHERE b.key IN $keys RETURN {_EDGE_RETURN}", keys=kept)), key=_edge_order)
        nodes = tuple(_node_from_record(rows[k], distances[k]) for k in kept)
        return Subgraph(center, depth, nodes, tuple(edges), len(distances) > limit)

    def targets(self, sources: Iterable[str], relation: str) -> dict[str, list[NodeView]]:
        found: dict[str, list[NodeView]] = defaultdict(list)
        for record in self._query(
                f"UNWIND $keys AS k MATCH (a:Node {{key: k}})"
                f"-[r:`{_relationship_type(relation)}`]->(b:Node) WHERE r.relation = $relation "
                f"RETURN DISTINCT k AS src, {_NODE_RETURN.format(k='b')} ORDER BY src, key",
                keys=sorted(set(sources)), relation=relation):
            found[record["src"]].append(_node_from_record(record))
        return dict(found)

    def counts(self) -> dict:
        nodes = self._query("MATCH (n:Node) RETURN n.type AS name, count(*) AS count "
                            "ORDER BY name")
        edges = self._query("MATCH (:Node)-[r]->(:Node) WHERE r.relation IS NOT NULL "
                            "RETURN r.relation AS name, count(*) AS count ORDER BY name")
        return {"nodes": {r["name"]: r["count"] for r in nodes},
                "edges": {r["name"]: r["count"] for r in edges}}

    def document_keys(self, source: str | None = None) -> set[str]:
        return {r["key"] for r in self._query(
            "MATCH (n:Node) WHERE n.type IN $documents "
            "AND ($source IS NULL OR n.source = $source) RETURN n.key AS key",
            source=source, documents=DOCUMENT_TYPES)}

    def dangling_edges(self) -> int:
        """Neo4j cannot store a relationship without its nodes; one of ours can still end at
        a node that is not a keyed ``Node`` (written by something else than ``apply``)."""
        records = self._query("MATCH (a)-[r]->(b) WHERE r.origin IS NOT NULL AND "
                              "NOT (a:Node AND b:Node AND a.key IS NOT NULL AND "
                              "b.key IS NOT NULL) RETURN count(r) AS count")
        return records[0]["count"]


# -- the query API's graph search -----------------------------------------------------------

def graph_search(store: GraphStore, center_key: str, depth: int = 1, *,
                 limit: int = DEFAULT_LIMIT) -> dict:
    """The neighbourhood of ``center_key`` as the query API returns it: the centre, the
    connected notes with their distance and tags, the edges grouped by relation with their
    evidence, and counts. Raises GraphNodeNotFound (a KeyError) for an absent centre."""
    subgraph = store.neighbourhood(center_key, depth, limit=limit)
    center, others = subgraph.nodes[0], subgraph.nodes[1:]
    notes = [n for n in others if n.type == NOTE]
    tags = store.targets([n.key for n in (center, *notes) if n.type == NOTE], TAGGED)

    def tag_names(key: str) -> list[str]:
        return [tag.title for tag in tags.get(key, [])]

    titles = {n.key: n.title for n in subgraph.nodes}
    relationships: dict[str, list[dict]] = defaultdict(list)
    for edge in subgraph.edges:
        relationships[edge.relation].append({
            "src": edge.src, "dst": edge.dst, "src_title": titles[edge.src],
            "dst_title": titles[edge.dst], "evidence": list(edge.evidence),
            "evidence_text": edge.evidence_text, "extractor": edge.extractor,
            "confidence": edge.confidence})
    by_type = Counter(n.type for n in others)
    center_view = center.as_dict()
    if center.type == NOTE:
        center_view["tags"] = tag_names(center.key)
    return {
        "center": center_view,
        "depth": depth,
        "truncated": subgraph.truncated,
        "notes": [{"key": n.key, "title": n.title, "source": n.source, "distance": n.distance,
                   "tags": tag_names(n.key)} for n in notes],
        "relationships": {relation: relationships[relation] for relation in sorted(relationships)},
        "counts": {"notes": len(notes), "tags": by_type[TAG], "links": by_type[LINK],
                   "relationships": len(subgraph.edges),
                   "by_relation": {r: len(relationships[r]) for r in sorted(relationships)}},
    }


# -- benchmark -----------------------------------------------------------------------------

def bench_neighbourhood(store: GraphStore, centers: Sequence[str], depth: int = 2, *,
                        limit: int = DEFAULT_LIMIT) -> dict:
    """Latency of ``neighbourhood`` over ``centers`` (after one untimed warm-up query)."""
    if not centers:
        raise ValueError("bench_neighbourhood needs at least one centre")
    store.neighbourhood(centers[0], depth, limit=limit)
    timings, sizes = [], []
    for center in centers:
        started = time.perf_counter()
        subgraph = store.neighbourhood(center, depth, limit=limit)
        timings.append((time.perf_counter() - started) * 1000)
        sizes.append(len(subgraph.nodes))
    ranks = statistics.quantiles(timings, n=100, method="inclusive") if len(timings) > 1 \
        else timings * 99
    return {"queries": len(timings), "depth": depth, "limit": limit,
            "p50_ms": round(ranks[49], 3), "p95_ms": round(ranks[94], 3),
            "max_ms": round(max(timings), 3), "nodes_p50": statistics.median(sizes)}


def synthetic_graph(notes: int = 10_000, *, seed: int = 0, source: str = "bench",
                    links_per_note: int = 5, tags: int = 200, tags_per_note: int = 3,
                    max_urls_per_note: int = 3) -> tuple[list[Node], list[Edge]]:
    """A vault-shaped graph for benchmarks: link targets drawn with Zipf popularity (a few
    hub notes, a long tail), tags uniformly, 0..max URLs per note from a Zipf-shared pool."""
    rng = random.Random(seed)
    note_keys = [f"note:{source}/note-{i:06d}.md" for i in range(notes)]
    tag_keys = [f"tag:topic-{i:03d}" for i in range(tags)]
    url_keys = [f"link:https://example.com/page-{i}" for i in range(max(1, notes // 2))]

    def zipf_cumulative(count: int) -> list[float]:
        total, cumulative = 0.0, []
        for rank in range(count):
            total += 1 / (rank + 1)
            cumulative.append(total)
        return cumulative

    link_targets = rng.sample(note_keys, len(note_keys))  # popularity unrelated to key order
    link_weights = zipf_cumulative(len(link_targets))
    url_weights = zipf_cumulative(len(url_keys))
    nodes = [Node(key, NOTE, f"Note {i}", source, {"words": rng.randint(50, 2000)})
             for i, key in enumerate(note_keys)]
    edges = []
    for note in note_keys:
        chunk = f"{rng.getrandbits(128):032x}"
        links = sorted(set(rng.choices(link_targets, cum_weights=link_weights,
                                       k=links_per_note)) - {note})
        urls = sorted(set(rng.choices(url_keys, cum_weights=url_weights,
                                      k=rng.randint(0, max_urls_per_note))))
        targets = [(t, "LINKS_TO", "wikilink", f"see [[{t}]]") for t in links]
        targets += [(t, TAGGED, "tag", f"#{t.removeprefix('tag:')}")
                    for t in sorted(rng.sample(tag_keys, tags_per_note))]
        targets += [(t, "LINKS_TO", "bare_url", t.removeprefix("link:")) for t in urls]
        edges += [Edge(note, dst, relation, EXPLICIT, extractor, note, source, (chunk,), text)
                  for dst, relation, extractor, text in targets]
    used = {e.dst for e in edges}
    nodes += [Node(key, TAG, key.removeprefix("tag:"), None) for key in tag_keys if key in used]
    nodes += [Node(key, LINK, key.removeprefix("link:"), None) for key in url_keys if key in used]
    return nodes, edges
