"""Graph layer: notes, tags and links as typed nodes and edges with evidence."""

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg
import numpy as np
from dagster_duckdb import DuckDBResource

from jarvis_assets.automation import follows_upstream
from jarvis_assets.chunks import chunks
from jarvis_assets.embeddings import embeddings
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.config import JarvisConfig
from jarvis_core.graph.model import Edge, SourceGraph
from jarvis_core.graph.repo import extract_repo_graph
from jarvis_core.graph.similarity import similarity_edges
from jarvis_core.graph.tickets import extract_ticket_graph
from jarvis_core.graph.vault import extract_vault_graph
from jarvis_core.sources.people import identities_of
from jarvis_core.sources.references import CROSS_EXTRACTOR, CROSS_ORIGIN_PREFIX
from jarvis_core.stores import tables
from jarvis_resources import (
    EmbedderResource,
    GraphStoreResource,
    JarvisConfigResource,
    VectorStoreResource,
)

GRAPH_POOL = "jarvis_graph"

_NOTE_COLUMNS = ("path, note_key, title, aliases, tags, tag_lines, wikilinks, embeds, links, "
                 "relations, frontmatter_links, body, body_start_line, frontmatter, "
                 "created_at, modified_at")


@dataclass(frozen=True)
class GraphExtractor:
    """How one source kind becomes a graph: the rows it reads (SQL with the source as its
    one parameter, read under a short connection) and the pure function over them."""

    queries: dict[str, str]
    extract: Callable[[str, JarvisConfig, dict[str, list[dict]], list[dict]], SourceGraph]


def _vault_graph(source: str, config: JarvisConfig, rows: dict[str, list[dict]],
                 chunk_rows: list[dict]) -> SourceGraph:
    return extract_vault_graph(source, rows["notes"], chunk_rows,
                               attachments={row["path"] for row in rows["attachments"]},
                               relation_fields=config.graph.relation_fields)


def _ticket_graph(source: str, config: JarvisConfig, rows: dict[str, list[dict]],
                  chunk_rows: list[dict]) -> SourceGraph:
    return extract_ticket_graph(source, rows["tickets"], chunk_rows)


def _repo_graph(source: str, config: JarvisConfig, rows: dict[str, list[dict]],
                chunk_rows: list[dict]) -> SourceGraph:
    return extract_repo_graph(source, rows["commits"], rows["commit_files"], rows["repo_files"],
                              rows["repo_docs"], rows["repo_knowledge"], chunk_rows,
                              knowledge_dir=config.repos[source].knowledge_dir,
                              known_people=identities_of(row["properties"]
                                                         for row in rows["people"]))


# By source kind; a source no longer configured extracts nothing, so its graph is removed.
GRAPH_EXTRACTORS: dict[str, GraphExtractor] = {
    "vault": GraphExtractor(
        {"notes": f"SELECT {_NOTE_COLUMNS} FROM notes WHERE source = ?",
         "attachments": "SELECT path FROM attachments WHERE source = ?"},
        _vault_graph),
    "tickets": GraphExtractor(
        {"tickets": "SELECT * EXCLUDE (source, path, file_hash, content_hash, warnings, "
                    "ingested_at) FROM tickets WHERE source = ?"},
        _ticket_graph),
    "repo": GraphExtractor(
        {"commits": "SELECT * EXCLUDE (source, ingested_at) FROM commits WHERE source = ?",
         "commit_files": "SELECT * EXCLUDE (source) FROM commit_files WHERE source = ?",
         "repo_files": "SELECT path, language FROM repo_files WHERE source = ?",
         "repo_docs": "SELECT path, title, text FROM repo_docs WHERE source = ?",
         "repo_knowledge": "SELECT path, components FROM repo_knowledge WHERE source = ?",
         "people": "SELECT properties FROM graph_nodes WHERE type = 'person' AND source <> ?"},
        _repo_graph),
}
_NOTHING = GraphExtractor({}, lambda *_: SourceGraph([], [], [], [], {}))


def _rows(items, **extra) -> list[dict]:
    return [{**vars(item), **extra} for item in items]


def _similar_notes(source: str, chunk_rows: list[dict], top_k: int, threshold: float,
                   embedder: EmbedderResource, vectors: VectorStoreResource) -> list[Edge]:
    """SIMILAR_TO edges between notes whose mean chunk vectors are close (inferred)."""
    model = embedder.get()
    with vectors.open(model.model, model.dimension) as vector_store:
        stored = vector_store.vectors([row["chunk_id"] for row in chunk_rows])
    by_note: dict[str, list[np.ndarray]] = {}
    for row in chunk_rows:
        if row["chunk_id"] in stored:
            by_note.setdefault(row["doc_key"], []).append(stored[row["chunk_id"]])
    return similarity_edges(source, {key: np.mean(vs, axis=0) for key, vs in by_note.items()},
                            top_k=top_k, threshold=threshold)


def _with_inferred(fingerprints: dict[str, str], inferred: list[Edge]) -> dict[str, str]:
    """Fold inferred edges into their origin's fingerprint, so a changed similarity
    rewrites that origin like any other change."""
    extra: dict[str, list[str]] = {}
    for edge in inferred:
        extra.setdefault(edge.origin, []).append(f"{edge.key}:{edge.weight:.6f}")
    return {origin: hashlib.sha256("|".join([fingerprint, *sorted(extra.get(origin, []))])
                                   .encode()).hexdigest()
            for origin, fingerprint in fingerprints.items()}


@dg.asset(
    partitions_def=source_partitions,
    deps=[chunks, embeddings],
    group_name="graph",
    kinds={"duckdb", "sqlite", "neo4j"},
    pool=GRAPH_POOL,
    automation_condition=follows_upstream,
)
def knowledge_graph(
    context: dg.AssetExecutionContext, jarvis: JarvisConfigResource, duckdb: DuckDBResource,
    graph: GraphStoreResource, embedder: EmbedderResource, vectors: VectorStoreResource,
) -> dg.MaterializeResult:
    """Nodes and edges of one source, every edge with the chunks and line it came from.

    Each source kind has its extractor (``GRAPH_EXTRACTORS``), all returning one shape.
    In vaults, links resolve the way Obsidian resolves them; unresolved and ambiguous
    targets are recorded in ``graph_broken_links``. With ``graph.similarity_top_k`` set,
    notes whose mean chunk vectors are close get inferred SIMILAR_TO edges. Only the
    subgraphs of documents whose output changed (an edit, a link that resolves differently,
    a new similarity) are rewritten, in DuckDB and the graph tables.
    """
    source = context.partition_key
    config = jarvis.load()
    kind = config.source_kind(source)
    extractor = GRAPH_EXTRACTORS.get(kind, _NOTHING)
    started = time.perf_counter()
    now = datetime.now(UTC).replace(tzinfo=None)
    with duckdb.get_connection() as conn:
        tables.ensure_schema(conn)
        inputs = {name: tables.read_frame(conn, sql, [source]).to_dicts()
                  for name, sql in extractor.queries.items()}
        chunk_rows = tables.read_frame(
            conn, "SELECT chunk_id, doc_key, path, char_start, char_end FROM chunks "
                  "WHERE source = ?", [source]).to_dicts()
        previous = dict(conn.execute(
            "SELECT origin, fingerprint FROM graph_origins WHERE source = ?", [source]).fetchall())
        first_seen = dict(conn.execute(
            "SELECT node_key, first_seen FROM graph_nodes WHERE source = ?", [source]).fetchall())

    extracted = extractor.extract(source, config, inputs, chunk_rows)
    settings = config.graph
    inferred = _similar_notes(source, chunk_rows, settings.similarity_top_k,
                              settings.similarity_threshold, embedder, vectors) \
        if settings.similarity_top_k and kind == "vault" else []
    fingerprints = _with_inferred(extracted.fingerprints, inferred)
    with graph.open() as graph_store:
        in_sync = graph_store.document_keys(source) == set(previous)
        changed = {origin for origin, fingerprint in fingerprints.items()
                   if not in_sync or previous.get(origin) != fingerprint}
        removed = set(previous) - set(fingerprints)
        rewrite = changed | removed
        # cross-source edges of rewritten documents go too (their evidence may have changed);
        # cross_source_links adds them back
        rewrite |= {CROSS_ORIGIN_PREFIX + origin for origin in rewrite}
        edges = [edge for edge in (*extracted.edges, *inferred) if edge.origin in changed]
        endpoints = {edge.src for edge in edges} | {edge.dst for edge in edges} | changed
        graph_store.apply(removed_origins=rewrite,
                          nodes=[node for node in extracted.nodes if node.key in endpoints],
                          edges=edges, removed_documents=removed)
        dangling = graph_store.dangling_edges()
    extracted_at = time.perf_counter()

    node_rows = [{"source": source, "node_key": n.key, "type": n.type, "title": n.title,
                  "node_source": n.source, "properties": json.dumps(n.properties, default=str),
                  "first_seen": first_seen.get(n.key, now), "last_seen": now}
                 for n in extracted.nodes]
    edge_rows = [{"edge_key": e.key, "source": source, "origin": e.origin, "src": e.src,
                  "dst": e.dst, "relation": e.relation, "confidence": e.confidence,
                  "extractor": e.extractor, "evidence": list(e.evidence),
                  "evidence_text": e.evidence_text, "weight": e.weight} for e in edges]
    with duckdb.get_connection() as conn:
        for table, rows in (
            ("graph_edges", edge_rows),
            ("graph_references",
             _rows(r for r in extracted.references if r.origin in changed)),
            ("graph_broken_links", _rows(b for b in extracted.broken if b.origin in changed)),
            ("chunk_mentions", _rows(m for m in extracted.mentions if m.origin in changed)),
            ("graph_origins", [{"source": source, "origin": origin, "fingerprint": fingerprint,
                                "extracted_at": now}
                               for origin, fingerprint in fingerprints.items()
                               if origin in changed]),
        ):
            tables.replace_rows(conn, table, source=source, remove_paths=rewrite,
                               rows=tables.frame(table, rows), key_column="origin")
        tables.replace_rows(conn, "graph_nodes", source=source, remove_paths=None,
                           rows=tables.frame("graph_nodes", node_rows))
        # as in the graph store, a node that is gone (a removed ticket, commit or file) takes
        # the cross-source edges touching it; cross_source_links resolves them again
        conn.execute("DELETE FROM graph_edges WHERE extractor = ? AND NOT ("
                     "src IN (SELECT node_key FROM graph_nodes) "
                     "AND dst IN (SELECT node_key FROM graph_nodes))", [CROSS_EXTRACTOR])
        edge_total, broken_total = conn.execute(
            "SELECT (SELECT count(*) FROM graph_edges WHERE source = $1), "
            "(SELECT count(*) FROM graph_broken_links WHERE source = $1)", [source]).fetchone()
        by_relation = conn.execute(
            "SELECT relation, count(*) FROM graph_edges WHERE source = ? GROUP BY relation "
            "ORDER BY relation", [source]).fetchall()

    counts = {"new": len(changed - set(previous)), "changed": len(changed & set(previous)),
              "unchanged": len(fingerprints) - len(changed), "deleted": len(removed),
              "failed": 0, "nodes": len(extracted.nodes), "edges": edge_total,
              "inferred_edges": len(inferred), "broken_links": broken_total}
    context.log.info(f"{source}: graph {counts}")
    return dg.MaterializeResult(metadata={
        **counts,
        "source_kind": kind or "(not configured)",
        "dagster/row_count": edge_total,
        "graph_store": graph.backend,
        "dangling_edges_in_store": dangling,
        "edges_by_relation": counts_table(dict(by_relation)),
        "broken_link_examples": markdown_table(
            _rows(extracted.broken), ["origin", "target", "reason", "line"]),
        "extract_seconds": round(extracted_at - started, 3),
        "total_seconds": round(time.perf_counter() - started, 3),
    })
