"""Bringing a source's graph up to date: read its inputs, decide which documents' subgraphs
changed (by fingerprint), and write exactly those to the graph store and the tables."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from jarvis_core.sources.extraction import GraphExtractor, SourceGraph
from jarvis_core.sources.plan import ItemCounts
from jarvis_core.sources.references import CROSS_EXTRACTOR, CROSS_ORIGIN_PREFIX
from jarvis_core.stores import tables
from jarvis_core.stores.graph.base import DOCUMENT_TYPES, GraphStore
from jarvis_core.stores.graph.elements import Edge, Node


@dataclass(frozen=True)
class GraphInputs:
    """What a source's graph is made from, and what the last run recorded."""

    rows: dict[str, list[dict]]     # the extractor's queries' rows
    chunk_rows: list[dict]          # chunk_id, doc_key, path, char_start, char_end
    previous: dict[str, str]        # origin -> fingerprint written last time
    first_seen: dict[str, datetime]  # node key -> when it first appeared


def read_inputs(conn: duckdb.DuckDBPyConnection, source: str, extractor: GraphExtractor,
                batch_rows: int) -> GraphInputs:
    """Every row the extractor reads, fetched ``batch_rows`` at a time
    (``resources.batch_rows``)."""
    return GraphInputs(
        {name: tables.read_dicts(conn, sql, [source], batch_rows)
         for name, sql in extractor.queries.items()},
        tables.read_dicts(conn, "SELECT chunk_id, doc_key, path, char_start, char_end "
                                "FROM chunks WHERE source = ?", [source], batch_rows),
        dict(conn.execute("SELECT origin, fingerprint FROM graph_origins WHERE source = ?",
                          [source]).fetchall()),
        dict(conn.execute("SELECT node_key, first_seen FROM graph_nodes WHERE source = ?",
                          [source]).fetchall()))


def store_in_sync(stored_documents: set[str], previous: Mapping[str, str]) -> bool:
    """Whether the graph store holds the document node of every origin the last run wrote,
    and no other (when not, every origin is rewritten). A source file of a repository is an
    origin without being a document node (a file node lives while an edge touches it), so
    only origins keyed by a document type count."""
    return stored_documents == {origin for origin in previous
                                if origin.partition(":")[0] in DOCUMENT_TYPES}


@dataclass(frozen=True)
class GraphUpdate:
    """The documents whose subgraph is rewritten and what replaces it."""

    fingerprints: dict[str, str]
    changed: set[str]          # origins extracted anew
    removed: set[str]          # origins gone (deleted documents)
    rewrite: set[str]          # every origin whose edges go, cross-source ones included
    nodes: list[Node]          # nodes the new edges touch
    edges: list[Edge]
    previous: frozenset[str]   # origins the last run wrote

    def counts(self) -> ItemCounts:
        return ItemCounts(new=len(self.changed - self.previous),
                          changed=len(self.changed & self.previous),
                          unchanged=len(self.fingerprints) - len(self.changed),
                          deleted=len(self.removed))


def plan_update(extracted: SourceGraph, inferred: list[Edge], fingerprints: dict[str, str],
                previous: dict[str, str], store_in_sync: bool) -> GraphUpdate:
    """Origins whose fingerprint moved (all of them when the store lost track), those gone,
    and the nodes and edges that replace them. Cross-source edges of rewritten documents go
    too (their evidence may have moved); cross-source linking adds them back."""
    changed = {origin for origin, fingerprint in fingerprints.items()
               if not store_in_sync or previous.get(origin) != fingerprint}
    removed = set(previous) - set(fingerprints)
    rewrite = changed | removed
    rewrite |= {CROSS_ORIGIN_PREFIX + origin for origin in rewrite}
    edges = [edge for edge in (*extracted.edges, *inferred) if edge.origin in changed]
    endpoints = {edge.src for edge in edges} | {edge.dst for edge in edges} | changed
    return GraphUpdate(fingerprints, changed, removed, rewrite,
                       [node for node in extracted.nodes if node.key in endpoints], edges,
                       frozenset(previous))


def apply_to_store(store: GraphStore, update: GraphUpdate) -> int:
    """Write the update to the graph store; the number of dangling edges it holds after."""
    store.apply(removed_origins=update.rewrite, nodes=update.nodes, edges=update.edges,
                removed_documents=update.removed)
    return store.dangling_edges()


def edge_row(edge: Edge) -> dict:
    return {"edge_key": edge.key, "source": edge.source, "origin": edge.origin,
            "src": edge.src, "dst": edge.dst, "relation": edge.relation,
            "confidence": edge.confidence, "extractor": edge.extractor,
            "evidence": list(edge.evidence), "evidence_text": edge.evidence_text,
            "weight": edge.weight}


def _in_batches(conn: duckdb.DuckDBPyConnection, table: tables.Table, source: str,
                removed: set[str] | None, items: list, to_row: Callable[[Any], dict],
                batch_rows: int) -> None:
    """Delete the source's rows of ``removed`` origins (every row for None), then insert a
    row per item ``batch_rows`` at a time: the rows and their frame exist a batch at a time.
    Fingerprints are written after the rows they stand for: a write cut short is redone."""
    for start in range(0, max(len(items), 1), batch_rows):
        tables.replace_rows(conn, table, source=source,
                            remove_paths=removed if start == 0 else (),
                            rows=[to_row(item) for item in items[start:start + batch_rows]],
                            key_column="origin")


def write_tables(conn: duckdb.DuckDBPyConnection, source: str, extracted: SourceGraph,
                 update: GraphUpdate, first_seen: dict[str, datetime], now: datetime,
                 batch_rows: int) -> dict:
    """Rewrite the changed origins' rows, refresh the source's nodes, drop cross-source
    edges that lost an end; the source's stored totals after it."""
    def changed(items) -> list:
        return [item for item in items if item.origin in update.changed]

    def node_row(node: Node) -> dict:
        return {"source": source, "node_key": node.key, "type": node.type, "title": node.title,
                "node_source": node.source,
                "properties": json.dumps(node.properties, default=str),
                "first_seen": first_seen.get(node.key, now), "last_seen": now}

    for table, items, to_row in (
        (tables.GRAPH_EDGES, update.edges, edge_row),
        (tables.GRAPH_REFERENCES, changed(extracted.references), vars),
        (tables.BROKEN_LINKS, changed(extracted.broken), vars),
        (tables.CHUNK_MENTIONS, changed(extracted.mentions), vars),
        (tables.GRAPH_ORIGINS, sorted(update.changed & set(update.fingerprints)),
         lambda origin: {"source": source, "origin": origin,
                         "fingerprint": update.fingerprints[origin], "extracted_at": now}),
    ):
        _in_batches(conn, table, source, update.rewrite, items, to_row, batch_rows)
    _in_batches(conn, tables.GRAPH_NODES, source, None, extracted.nodes, node_row, batch_rows)
    # as in the graph store, a node that is gone (a removed ticket, commit or file) takes the
    # cross-source edges touching it; cross-source linking resolves them again
    conn.execute("DELETE FROM graph_edges WHERE extractor = ? AND NOT ("
                 "src IN (SELECT node_key FROM graph_nodes) "
                 "AND dst IN (SELECT node_key FROM graph_nodes))", [CROSS_EXTRACTOR])
    edges, broken = conn.execute(
        "SELECT (SELECT count(*) FROM graph_edges WHERE source = $1), "
        "(SELECT count(*) FROM graph_broken_links WHERE source = $1)", [source]).fetchone()
    by_relation = dict(conn.execute(
        "SELECT relation, count(*) FROM graph_edges WHERE source = ? GROUP BY relation "
        "ORDER BY relation", [source]).fetchall())
    return {"edges": edges, "broken_links": broken, "edges_by_relation": by_relation}
