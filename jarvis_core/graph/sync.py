"""Bringing a source's graph up to date a batch of documents at a time: read its inputs,
decide which documents' subgraphs changed (by fingerprint), and write exactly those to the
graph store and the tables; at the end, remove what no document produced any more."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import polars as pl

from jarvis_core.graph.similarity import with_inferred
from jarvis_core.sources.extraction import BrokenLink, GraphExtractor, SourceGraph
from jarvis_core.sources.plan import ItemCounts
from jarvis_core.sources.references import CROSS_EXTRACTOR, CROSS_ORIGIN_PREFIX
from jarvis_core.stores import tables
from jarvis_core.stores.graph.base import DOCUMENT_TYPES, GraphStore
from jarvis_core.stores.graph.elements import Edge, Node
from jarvis_core.stores.tables import Connect


@dataclass(frozen=True)
class GraphInputs:
    """What every batch of a source's graph is made from, and what the last run recorded."""

    rows: dict[str, list[dict]]     # the extractor's queries' rows
    previous: dict[str, str]        # origin -> fingerprint written last time
    first_seen: dict[str, datetime]  # node key -> when it first appeared


def read_inputs(conn: duckdb.DuckDBPyConnection, source: str, extractor: GraphExtractor,
                batch_rows: int) -> GraphInputs:
    """Every row the extractor's queries read, fetched ``batch_rows`` at a time
    (``resources.batch_rows``)."""
    return GraphInputs(
        {name: tables.read_dicts(conn, sql, [source], batch_rows)
         for name, sql in extractor.queries.items()},
        dict(conn.execute("SELECT origin, fingerprint FROM graph_origins WHERE source = ?",
                          [source]).fetchall()),
        dict(conn.execute("SELECT node_key, first_seen FROM graph_nodes WHERE source = ?",
                          [source]).fetchall()))


@dataclass(frozen=True)
class DocumentBatch:
    """One batch of a source's documents: their rows (by the names the extractor reads
    them under) and their chunks' spans."""

    rows: dict[str, list[dict]]
    chunk_rows: list[dict]          # chunk_id, doc_key, path, char_start, char_end


_CHUNK_SPANS = "SELECT chunk_id, doc_key, path, char_start, char_end FROM chunks WHERE source = ?"



def document_batches(connect: Connect, source: str, extractor: GraphExtractor, batch_documents: int,
                     batch_rows: int) -> Iterator[DocumentBatch]:
    """The source's documents a batch at a time (one batch of every chunk for a kind
    without ``batches``), each read on a connection of its own (``connect``) that is
    closed before the batch is extracted and written."""
    batches = extractor.batches
    if batches is None:
        with connect() as conn:
            chunk_rows = tables.read_dicts(conn, _CHUNK_SPANS, [source], batch_rows)
        yield DocumentBatch({}, chunk_rows)
        return
    column, after = batches.id_column, None
    while True:
        with connect() as conn:
            documents = tables.read_dicts(
                conn, f"SELECT * FROM ({batches.query}) "
                      + (f'WHERE "{column}" > ? ' if after is not None else "")
                      + f'ORDER BY "{column}" LIMIT {batch_documents}',
                [source] + ([after] if after is not None else []), batch_rows)
            if not documents:
                return
            ids = [row[column] for row in documents]
            rows = {batches.name: documents, **{
                name: tables.read_dicts(conn, sql, [source, ids], batch_rows)
                for name, sql in batches.per_batch.items()}}
            chunk_rows = tables.read_dicts(
                conn, _CHUNK_SPANS + " AND doc_key IN (SELECT unnest(?))",
                [source, [batches.key(source, row) for row in documents]], batch_rows)
        yield DocumentBatch(rows, chunk_rows)
        after = ids[-1]


def store_in_sync(stored_documents: set[str], previous: Mapping[str, str]) -> bool:
    """Whether the graph store holds the document node of every origin the last run wrote,
    and no other (when not, every origin is rewritten). A source file of a repository is an
    origin without being a document node (a file node lives while an edge touches it), so
    only origins keyed by a document type count."""
    return stored_documents == {origin for origin in previous
                                if origin.partition(":")[0] in DOCUMENT_TYPES}


@dataclass(frozen=True)
class GraphUpdate:
    """The documents of a batch whose subgraph is rewritten and what replaces it."""

    fingerprints: dict[str, str]
    changed: set[str]          # origins extracted anew
    rewrite: set[str]          # every origin whose edges go, cross-source ones included
    nodes: list[Node]          # nodes the new edges touch
    edges: list[Edge]
    previous: frozenset[str]   # origins the last run wrote


def plan_update(extracted: SourceGraph, inferred: list[Edge], fingerprints: dict[str, str],
                previous: dict[str, str], store_in_sync: bool) -> GraphUpdate:
    """Origins whose fingerprint moved (all of them when the store lost track) and the nodes
    and edges that replace them. Cross-source edges of rewritten documents go too (their
    evidence may have moved); cross-source linking adds them back."""
    changed = {origin for origin, fingerprint in fingerprints.items()
               if not store_in_sync or previous.get(origin) != fingerprint}
    rewrite = changed | {CROSS_ORIGIN_PREFIX + origin for origin in changed}
    edges = [edge for edge in (*extracted.edges, *inferred) if edge.origin in changed]
    endpoints = {edge.src for edge in edges} | {edge.dst for edge in edges} | changed
    return GraphUpdate(fingerprints, changed, rewrite,
                       [node for node in extracted.nodes if node.key in endpoints], edges,
                       frozenset(previous))


def edge_row(edge: Edge) -> dict:
    return {"edge_key": edge.key, "source": edge.source, "origin": edge.origin,
            "src": edge.src, "dst": edge.dst, "relation": edge.relation,
            "confidence": edge.confidence, "extractor": edge.extractor,
            "evidence": list(edge.evidence), "evidence_text": edge.evidence_text,
            "weight": edge.weight}


def _in_batches(conn: duckdb.DuckDBPyConnection, table: tables.Table, source: str,
                removed: set[str] | None, items: list, to_row: Callable[[Any], dict],
                batch_rows: int, key_column: str = "origin") -> None:
    """Delete the source's rows whose ``key_column`` is in ``removed`` (every row for None),
    then insert a row per item ``batch_rows`` at a time: the rows and their frame exist a
    batch at a time. Fingerprints are written after the rows they stand for: a write cut
    short is redone."""
    for start in range(0, max(len(items), 1), batch_rows):
        tables.replace_rows(conn, table, source=source,
                            remove_paths=removed if start == 0 else (),
                            rows=[to_row(item) for item in items[start:start + batch_rows]],
                            key_column=key_column)


# A source's tables whose rows belong to an origin (the document that produced them); the
# fingerprints last, after the rows they stand for.
_ORIGIN_TABLES = (tables.GRAPH_EDGES, tables.GRAPH_REFERENCES, tables.BROKEN_LINKS,
                  tables.CHUNK_MENTIONS, tables.GRAPH_ORIGINS)


def write_batch(conn: duckdb.DuckDBPyConnection, source: str, extracted: SourceGraph,
                update: GraphUpdate, first_seen: dict[str, datetime], now: datetime,
                batch_rows: int) -> None:
    """Rewrite the batch's changed origins' rows and its nodes (``last_seen`` now)."""
    def changed(items) -> list:
        return [item for item in items if item.origin in update.changed]

    def node_row(node: Node) -> dict:
        return {"source": source, "node_key": node.key, "type": node.type, "title": node.title,
                "node_source": node.source,
                "properties": json.dumps(node.properties, default=str),
                "first_seen": first_seen.get(node.key, now), "last_seen": now}

    for table, (items, to_row) in zip(_ORIGIN_TABLES, (
        (update.edges, edge_row),
        (changed(extracted.references), vars),
        (changed(extracted.broken), vars),
        (changed(extracted.mentions), vars),
        (sorted(update.changed & set(update.fingerprints)),
         lambda origin: {"source": source, "origin": origin,
                         "fingerprint": update.fingerprints[origin], "extracted_at": now}),
    ), strict=True):
        _in_batches(conn, table, source, update.rewrite, items, to_row, batch_rows)
    _in_batches(conn, tables.GRAPH_NODES, source, {node.key for node in extracted.nodes},
                extracted.nodes, node_row, batch_rows, key_column="node_key")


def finish_tables(conn: duckdb.DuckDBPyConnection, source: str, gone: set[str],
                  nodes: set[str]) -> dict:
    """After the last batch: drop the rows of ``gone`` origins and the source's nodes not in
    ``nodes``, and cross-source edges that lost an end; the source's stored totals."""
    for table in _ORIGIN_TABLES:
        if gone:
            tables.replace_rows(conn, table, source=source, remove_paths=gone, rows=[],
                                key_column="origin")
    kept = pl.DataFrame({"node_key": sorted(nodes)}, schema={"node_key": pl.Utf8})
    conn.register("jarvis_kept_nodes", kept.to_arrow())
    try:
        conn.execute("DELETE FROM graph_nodes WHERE source = ? AND node_key NOT IN "
                     "(SELECT node_key FROM jarvis_kept_nodes)", [source])
    finally:
        conn.unregister("jarvis_kept_nodes")
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


BROKEN_EXAMPLES = 20  # broken links a run shows in its metadata


@dataclass
class GraphRun:
    """What bringing one source's graph up to date did."""

    counts: ItemCounts = field(default_factory=ItemCounts)
    changed: set[str] = field(default_factory=set)   # origins rewritten
    removed: set[str] = field(default_factory=set)   # origins gone (deleted documents)
    nodes: int = 0
    edges_written: int = 0
    inferred: int = 0
    broken: list[BrokenLink] = field(default_factory=list)  # the first BROKEN_EXAMPLES
    dangling: int = 0            # edges of the graph store naming an absent node after it
    figures: dict = field(default_factory=dict)  # the source's stored totals


def sync_graph(source: str, extractor: GraphExtractor, extract: Callable[..., SourceGraph],
               connect: Connect, store: GraphStore, *, now: datetime, batch_documents: int,
               batch_rows: int, inferred: list[Edge] = ()) -> GraphRun:
    """Bring the source's graph up to date a batch of documents at a time
    (``document_batches``): each batch is extracted (``extract``: rows and chunk rows to the
    batch's graph), its changed subgraphs written to the store and the tables, then the next
    is read; what the last run wrote and no batch produced is removed at the end. An edge
    that ends on a document of a later batch (not yet stored) waits for the end, with the
    batch's nodes it touches. ``inferred`` edges (similarities, computed over the whole
    source) join their origin's batch."""
    with connect() as conn:
        inputs = read_inputs(conn, source, extractor, batch_rows)
    stored = store.document_keys(source)
    in_sync = store_in_sync(stored, inputs.previous)
    run, seen, nodes = GraphRun(inferred=len(inferred)), set(), set()
    inferred_from: dict[str, list[Edge]] = {}
    for edge in inferred:
        inferred_from.setdefault(edge.origin, []).append(edge)
    tally = Counter()
    waiting_edges: list[Edge] = []
    waiting_nodes: dict[str, Node] = {}
    for batch in document_batches(connect, source, extractor, batch_documents, batch_rows):
        extracted = extract({**inputs.rows, **batch.rows}, batch.chunk_rows)
        similar = [edge for origin in extracted.fingerprints
                   for edge in inferred_from.get(origin, ())]
        fingerprints = with_inferred(extracted.fingerprints, similar)
        update = plan_update(extracted, similar, fingerprints, inputs.previous, in_sync)
        here = {node.key: node for node in extracted.nodes}
        stored |= {key for key, node in here.items() if node.type in DOCUMENT_TYPES}
        ready = []
        for edge in update.edges:
            if all(key in here or key in stored for key in (edge.src, edge.dst)):
                ready.append(edge)
            else:
                waiting_edges.append(edge)
                waiting_nodes.update({key: here[key] for key in (edge.src, edge.dst)
                                      if key in here})
        if update.changed:
            store.apply(removed_origins=update.rewrite, nodes=update.nodes, edges=ready)
        with connect() as conn:
            write_batch(conn, source, extracted, update, inputs.first_seen, now, batch_rows)
        seen |= fingerprints.keys()
        nodes |= here.keys()
        run.changed |= update.changed
        tally["new"] += len(update.changed - update.previous)
        tally["changed"] += len(update.changed & update.previous)
        tally["unchanged"] += len(fingerprints) - len(update.changed)
        run.edges_written += len(update.edges)
        run.broken += extracted.broken[:BROKEN_EXAMPLES - len(run.broken)]
    run.removed = set(inputs.previous) - seen
    gone = run.removed | {CROSS_ORIGIN_PREFIX + origin for origin in run.removed}
    if gone or waiting_edges:
        store.apply(removed_origins=gone, nodes=list(waiting_nodes.values()),
                    edges=waiting_edges, removed_documents=run.removed)
    run.dangling = store.dangling_edges()
    with connect() as conn:
        run.figures = finish_tables(conn, source, gone, nodes)
    run.counts = ItemCounts(**tally, deleted=len(run.removed))
    run.nodes = len(nodes)
    return run
