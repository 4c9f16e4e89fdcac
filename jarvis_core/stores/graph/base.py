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
into a ``prop_<name>`` property, so Cypher can filter on them."""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

from jarvis_core.stores.graph.elements import Edge, Node

if TYPE_CHECKING:
    pass


MIN_DEPTH, MAX_DEPTH = 1, 3


DEFAULT_LIMIT = 500


NOTE, TAG, LINK = "note", "tag", "link"


TAGGED = "TAGGED"


# Nodes that stand for a source's documents: they live until their document is removed,
# while every other node is garbage once no edge touches it.
DOCUMENT_TYPES = (NOTE, "commit", "repo_doc", "ticket", "thread", "page")


DOCUMENT_TYPES_SQL = "(" + ", ".join(f"'{t}'" for t in DOCUMENT_TYPES) + ")"


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
    """One interface, identical behaviour on every backend
    (tests/stores/test_graph_store_contract.py holds every backend to it)."""

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
        """Keys of the document nodes (``DOCUMENT_TYPES``) of ``source``."""

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


def _check_node(node: Node) -> None:
    if not isinstance(node.key, str) or not node.key:
        raise ValueError(f"node key must be a non-empty string: {node!r}")
    if not isinstance(node.type, str) or not _NODE_TYPE.match(node.type):
        raise ValueError(f"node {node.key!r}: type must be lower snake case, got {node.type!r}")
    node_properties_json(node)


def node_properties_json(node: Node) -> str:
    if not isinstance(node.properties, dict):
        raise ValueError(f"node {node.key!r}: properties must be a dict")
    try:
        return json.dumps(node.properties, sort_keys=True, ensure_ascii=False,
                          separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"node {node.key!r}: properties are not JSON: {error}") from error


def dangling_error(edges: Iterable[Edge], missing: set[str]) -> ValueError:
    edge = next(e for e in edges if e.src in missing or e.dst in missing)
    absent = ", ".join(sorted({edge.src, edge.dst} & missing))
    return ValueError(f"edge {edge.src} -[{edge.relation}]-> {edge.dst} (origin {edge.origin}, "
                      f"key {edge.key}) names an absent node: {absent}; the batch must carry "
                      f"a node for every endpoint")


def edge_order(edge: Edge) -> tuple:
    return edge.src, edge.relation, edge.dst, edge.origin, edge.extractor


def batched(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


NEO4J_BATCH = 1000
