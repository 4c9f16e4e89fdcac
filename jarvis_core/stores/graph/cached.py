"""A published SQLite graph with its adjacency held in memory, for fast neighbourhoods."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from jarvis_core.stores.graph.base import (
    GraphNodeNotFound,
    GraphStore,
    GraphStoreReadOnly,
    NodeView,
    Subgraph,
    edge_order,
)
from jarvis_core.stores.graph.elements import Edge, Node
from jarvis_core.stores.graph.sqlite import (
    IN_JSON,
    NODE_COLUMNS,
    SqliteGraphStore,
    json_list,
    nodes_from_rows,
)

# Edges kept once read (a few hundred bytes each: ends, relation, evidence ids and line).
EDGES_KEPT = 30_000


class CachedGraphStore(GraphStore):
    """A published copy opened read-only, its adjacency held in memory for ``neighbourhood``.

    Most of a depth-2 query in SQLite goes to writing, into temp tables, and ranking the
    thousands of nodes a hub note or a popular tag brings into reach; here the search and the
    ranking run over integer ids (numbered in (type, key) order, so ranking is a plain sort)
    in compressed sparse rows (numpy arrays: a node's neighbours, and its outgoing edges'
    targets, rows and relations, are slices), and only the kept edges are read from the file;
    nodes are read once and kept (tags of the notes in reach come from the same cache), and so
    are edges, up to ``EDGES_KEPT``. The copy never changes, so the caches never go stale.
    Memory: about 40 bytes per edge of topology, plus the node keys and what was read."""

    def __init__(self, path: Path) -> None:
        self._store = SqliteGraphStore.open_read_only(path, immutable=True)
        try:
            with self._store._reading() as conn:
                self._keys = [key for (key,) in conn.execute(
                    "SELECT key FROM nodes ORDER BY type, key")]
                self._ids = {key: number for number, key in enumerate(self._keys)}
                codes: dict[str, int] = {}  # relation -> its number
                parts: list[tuple[np.ndarray, ...]] = []
                found = conn.execute("SELECT rowid, src, dst, relation FROM edges")
                ids = self._ids
                while rows := found.fetchmany(65536):  # a batch of rows at a time
                    count = len(rows)
                    parts.append((
                        np.fromiter((ids[row[1]] for row in rows), np.int32, count),
                        np.fromiter((ids[row[2]] for row in rows), np.int32, count),
                        np.fromiter((row[0] for row in rows), np.int64, count),
                        np.fromiter((codes.setdefault(row[3], len(codes)) for row in rows),
                                    np.int16, count)))
                self._relations = list(codes)
        except BaseException:
            self._store.close()
            raise
        nodes = len(self._keys)
        src, dst, rowids, relations = (
            np.concatenate([part[column] for part in parts]) if parts
            else np.empty(0, dtype=dtype)
            for column, dtype in enumerate((np.int32, np.int32, np.int64, np.int16)))
        by_src = np.argsort(src, kind="stable")
        self._out = _Rows(src[by_src], nodes, dst[by_src], rowids[by_src], relations[by_src])
        # both directions, each neighbour once: a pair as one number, sorted by its first node
        pairs = _sorted_once(np.concatenate([src.astype(np.int64) * nodes + dst,
                                             dst.astype(np.int64) * nodes + src]))
        self._neighbours = _Rows((pairs // max(nodes, 1)).astype(np.int32), nodes,
                                 (pairs % max(nodes, 1)).astype(np.int32))
        self._views: dict[int, NodeView] = {}  # nodes read so far; the copy never changes
        self._views_lock = threading.Lock()
        self._edges_read: dict[int, Edge] = {}  # by rowid, at most EDGES_KEPT
        self._edges_lock = threading.Lock()

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
        rings = [np.array([start], dtype=np.int32)]
        seen = np.zeros(len(self._keys), dtype=bool)  # a flag per node: cheaper than sets
        seen[start], reached = True, 1
        while len(rings) <= depth and reached <= limit:
            [found] = self._neighbours.gather(rings[-1])
            ring = _sorted_once(found[~seen[found]])
            if not ring.size:
                break
            rings.append(ring)
            seen[ring] = True
            reached += ring.size
        kept: list[tuple[int, int]] = []
        for distance, ring in enumerate(rings):
            kept += [(node, distance) for node in ring[:limit - len(kept)].tolist()]
        members = np.zeros(len(self._keys), dtype=bool)
        members[[node for node, _ in kept]] = True
        member_ids = np.flatnonzero(members).astype(np.int32)
        targets, rowids, _ = self._out.gather(member_ids)
        views = self._node_views(set(member_ids.tolist()))
        edges = self._edges(rowids[members[targets]].tolist())
        nodes = [NodeView(view.key, view.type, view.title, view.source, view.properties,
                          distance) for node, distance in kept for view in (views[node],)]
        return Subgraph(center, depth, tuple(nodes), tuple(edges), reached > limit)

    def _edges(self, rowids: list[int]) -> list[Edge]:
        """The edges of ``rowids`` in edge order, read from the file only when not read
        before: neighbourhoods overlap (GraphRAG walks ten seeds' at once, an assistant's next
        question mostly the same notes). At most ``EDGES_KEPT`` are kept; full, they are all
        dropped and kept again as read."""
        with self._edges_lock:
            found = {rowid: edge for rowid in rowids
                     if (edge := self._edges_read.get(rowid)) is not None}
            if len(found) < len(rowids):
                with self._store._reading() as conn:
                    read = self._store._edges_by_rowid(
                        conn, [rowid for rowid in rowids if rowid not in found])
                found.update(read)
                if len(self._edges_read) + len(read) > EDGES_KEPT:
                    self._edges_read.clear()
                if len(read) <= EDGES_KEPT:
                    self._edges_read.update(read)
        return sorted(found.values(), key=edge_order)

    def node(self, key: str) -> NodeView | None:
        return self._store.node(key)

    def targets(self, sources: Iterable[str], relation: str) -> dict[str, list[NodeView]]:
        """From the in-memory adjacency; only target nodes not read before hit the file (a
        neighbourhood's hundreds of notes share a few hundred tags)."""
        if relation not in self._relations:
            return {}
        code = self._relations.index(relation)
        known = [(key, self._ids[key]) for key in set(sources) if key in self._ids]
        nodes = np.array([node for _, node in known], dtype=np.int32)
        # every source's edges in one gather: one per source cost 50 µs each, 25 ms a search
        targets, _, relations = self._out.gather(nodes)
        owners = np.repeat(np.arange(len(known)), self._out.lengths(nodes))
        related = relations == code
        found: dict[int, set[int]] = {}
        for owner, target in zip(owners[related].tolist(), targets[related].tolist()):
            found.setdefault(owner, set()).add(target)
        wanted = {known[owner][0]: sorted(nodes_found, key=self._keys.__getitem__)
                  for owner, nodes_found in found.items()}
        views = self._node_views({node for found in wanted.values() for node in found})
        return {key: [views[node] for node in found] for key, found in wanted.items()}

    def _node_views(self, nodes: set[int]) -> dict[int, NodeView]:
        with self._views_lock:
            missing = [self._keys[node] for node in nodes if node not in self._views]
            if missing:
                with self._store._reading() as conn:
                    rows = conn.execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE key IN "
                                        f"{IN_JSON}", (json_list(missing),)).fetchall()
                for view in nodes_from_rows(rows):
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


class _Rows:
    """Compressed sparse rows: for each node (0..nodes-1), a slice of each of ``columns``,
    from rows sorted by ``owner``."""

    def __init__(self, owner: np.ndarray, nodes: int, *columns: np.ndarray) -> None:
        self.starts = np.zeros(nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner, minlength=nodes), out=self.starts[1:])
        self.columns = columns

    def lengths(self, nodes: np.ndarray) -> np.ndarray:
        """How many rows each of ``nodes`` has."""
        return self.starts[nodes + 1] - self.starts[nodes]

    def gather(self, nodes: np.ndarray) -> list[np.ndarray]:
        """Every column's values for all of ``nodes``' rows, one array per column, the
        nodes' rows one after another in their order."""
        starts = self.starts[nodes]
        lengths = self.lengths(nodes)
        total = int(lengths.sum())
        at = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        return [column[at] for column in self.columns]


def _sorted_once(values: np.ndarray) -> np.ndarray:
    """``values`` sorted, each once (np.unique hashes, several times slower on ids)."""
    values = np.sort(values)
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if values.size \
        else values
