"""The embedded graph back end: one SQLite file (WAL), published as a read-only copy."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from jarvis_core.stores.graph.elements import Edge, Node

if TYPE_CHECKING:
    pass
from jarvis_core.stores.graph.base import (
    DOCUMENT_TYPES,
    DOCUMENT_TYPES_SQL,
    GraphNodeNotFound,
    GraphStore,
    GraphStoreReadOnly,
    NodeView,
    Subgraph,
    dangling_error,
    edge_order,
    node_properties_json,
)

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


NODE_COLUMNS = "key, type, title, source, properties"


_EDGE_COLUMNS = ("src, dst, relation, confidence, extractor, origin, source, evidence, "
                 "evidence_text, weight")


IN_JSON = "(SELECT value FROM json_each(?))"  # one JSON array parameter: no variable limit


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


def json_list(values: Iterable) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def _json_texts(texts: list[str]) -> list:
    """Decode many JSON texts with one ``json.loads``: on a neighbourhood's thousand small
    documents the per-call overhead, not the parsing, is what costs."""
    return json.loads(f"[{','.join(texts)}]")


def nodes_from_rows(rows: list[Sequence]) -> list[NodeView]:
    """Rows of key, type, title, source, properties and, optionally, distance."""
    properties = _json_texts([row[4] for row in rows])
    return [NodeView(row[0], row[1], row[2], row[3], props, row[5] if len(row) > 5 else None)
            for row, props in zip(rows, properties)]


def _edges_from_rows(rows: list[Sequence]) -> list[Edge]:
    evidence = _json_texts([row[7] for row in rows])
    return [Edge(src, dst, relation, confidence, extractor, origin, source, tuple(chunks),
                 text, weight)
            for (src, dst, relation, confidence, extractor, origin, source, _, text, weight),
            chunks in zip(rows, evidence)]


# What files this process checked and then closed looked like after closing them. One that
# still looks so was not written since (by another process, or a disk that damaged it), and
# SQLite's structural check, which reads the whole file, is not repeated: a refresh opens
# the graph store five times, and each check read all of it (1 GB at 1M chunks).
_CHECKED_AS: dict[Path, tuple] = {}


def _identity(path: Path) -> tuple | None:
    """Inode, size and modification time of the file, and the size of its write-ahead log
    (opening creates an empty one, closing removes it); None for no file."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return None
    try:
        log_size = path.with_name(f"{path.name}-wal").stat().st_size
    except FileNotFoundError:
        log_size = 0
    return status.st_ino, status.st_size, status.st_mtime_ns, log_size


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
        self._checked = False

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
        store._checked = False
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
                if self._checked and not self.read_only:
                    _CHECKED_AS[self.path] = _identity(self.path)

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
                touched = self._delete_edges(f"origin IN {IN_JSON}",
                                             (json_list(removed_origins),))
                documents = json_list(removed_documents)
                doomed = (f"(SELECT key FROM nodes WHERE type IN {DOCUMENT_TYPES_SQL} "
                          f"AND key IN {IN_JSON})")
                touched |= self._delete_edges(f"src IN {doomed} OR dst IN {doomed}",
                                              (documents, documents))
                conn.execute(f"DELETE FROM nodes WHERE type IN {DOCUMENT_TYPES_SQL} "
                             f"AND key IN {IN_JSON}", (documents,))
                conn.executemany(
                    f"INSERT INTO nodes ({NODE_COLUMNS}) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET type = excluded.type, "
                    "title = excluded.title, source = excluded.source, "
                    "properties = excluded.properties",
                    [(n.key, n.type, n.title, n.source, node_properties_json(n)) for n in nodes])
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
                    f"DELETE FROM nodes WHERE key IN {IN_JSON} "
                    f"AND type NOT IN {DOCUMENT_TYPES_SQL} "
                    "AND NOT EXISTS (SELECT 1 FROM edges WHERE src = nodes.key) "
                    "AND NOT EXISTS (SELECT 1 FROM edges WHERE dst = nodes.key)",
                    (json_list(candidates),))
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
            f"SELECT key FROM nodes WHERE key IN {IN_JSON}", (json_list(others),))}
        if others - present:
            raise dangling_error(edges, others - present)

    # -- reads -------------------------------------------------------------------------

    def node(self, key: str) -> NodeView | None:
        with self._lock:
            self._require_open()
            row = self._conn.execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE key = ?",
                                     (key,)).fetchone()
        return None if row is None else nodes_from_rows([row])[0]

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
            nodes = nodes_from_rows(conn.execute(_KEPT_NODES).fetchall())
            edges = self._edges_by_rowid(conn, (r for (r,) in conn.execute(_KEPT_EDGE_ROWIDS)))
        return Subgraph(center, depth, tuple(nodes),
                        tuple(sorted(edges.values(), key=edge_order)), reached > limit)

    @staticmethod
    def _edges_by_rowid(conn: sqlite3.Connection, rowids: Iterable[int]) -> dict[int, Edge]:
        rows = conn.execute(f"SELECT rowid, {_EDGE_COLUMNS} FROM edges WHERE rowid IN {IN_JSON}",
                            (json_list(rowids),)).fetchall()
        return dict(zip([row[0] for row in rows], _edges_from_rows([row[1:] for row in rows]),
                        strict=True))

    def targets(self, sources: Iterable[str], relation: str) -> dict[str, list[NodeView]]:
        found: dict[str, list[NodeView]] = defaultdict(list)
        with self._lock:
            self._require_open()
            rows = self._conn.execute(
                "SELECT DISTINCT e.src, n.key, n.type, n.title, n.source, n.properties "
                "FROM edges e JOIN nodes n ON n.key = e.dst "
                f"WHERE e.src IN {IN_JSON} AND e.relation = ? ORDER BY e.src, n.key",
                (json_list(set(sources)), relation)).fetchall()
        for row, node in zip(rows, nodes_from_rows([row[1:] for row in rows])):
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
                f"SELECT key FROM nodes WHERE type IN {DOCUMENT_TYPES_SQL} "
                "AND (?1 IS NULL OR source = ?1)", (source,)).fetchall()
        return {key for (key,) in rows}

    def check(self) -> dict[str, int]:
        """Document nodes per source, after SQLite's structural check (unless this process
        closed the file as it is now); raises ``sqlite3.DatabaseError`` for a damaged file."""
        with self._reading() as conn:
            if _CHECKED_AS.get(self.path, False) != _identity(self.path):
                problems = [row[0] for row in conn.execute("PRAGMA quick_check(3)").fetchall()]
                if problems != ["ok"]:
                    raise sqlite3.DatabaseError(f"{self.path}: {'; '.join(problems)}")
            self._checked = True
            return dict(conn.execute(f"SELECT source, count(*) FROM nodes WHERE type IN "
                                     f"{DOCUMENT_TYPES_SQL} GROUP BY source").fetchall())

    def dangling_edges(self) -> int:
        with self._lock:
            self._require_open()
            (count,) = self._conn.execute(
                "SELECT count(*) FROM edges e "
                "WHERE NOT EXISTS (SELECT 1 FROM nodes WHERE key = e.src) "
                "OR NOT EXISTS (SELECT 1 FROM nodes WHERE key = e.dst)").fetchone()
        return count
