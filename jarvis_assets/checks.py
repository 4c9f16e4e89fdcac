"""Asset checks: the guarantees later layers rely on, checked on the stored tables.

A check runs on the partition (source) of its run when it has one, else on every source.
Checks that later layers depend on block them.
"""

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_assets.chunks import chunks
from jarvis_assets.cross_links import cross_link_checks
from jarvis_assets.embeddings import embeddings
from jarvis_assets.graph import knowledge_graph
from jarvis_assets.keyword_index import keyword_index
from jarvis_assets.metadata import markdown_table
from jarvis_assets.notes import raw_notes
from jarvis_assets.partitions import WHOLE_SOURCE
from jarvis_assets.repos import raw_repository
from jarvis_assets.tickets import raw_tickets
from jarvis_core.stores import tables
from jarvis_core.stores.keyword import KeywordIndex
from jarvis_core.text.chunking import embedding_text
from jarvis_core.text.tokens import token_counter
from jarvis_resources import (
    EmbedderResource,
    GraphStoreResource,
    JarvisConfigResource,
    VectorStoreResource,
)

_PARTITION_TAG = "dagster/partition"


def _sources_in_scope(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource
                      ) -> list[str]:
    partition = context.run.tags.get(_PARTITION_TAG)
    return [partition] if partition else jarvis.load().source_names


def _ratio_warning(rows: list[dict], *, good: str, bad: str, limit: float
                   ) -> dg.AssetCheckResult:
    """Warns when, in some source, bad / (good + bad) exceeds ``limit``."""
    for row in rows:
        total = row[good] + row[bad]
        row["ratio"] = round(row[bad] / total, 4) if total else 0.0
    worst = max((row["ratio"] for row in rows), default=0.0)
    return dg.AssetCheckResult(
        passed=worst <= limit, severity=dg.AssetCheckSeverity.WARN,
        metadata={"worst_ratio": worst, "limit": limit,
                  "per_source": markdown_table(rows, ["source", good, bad, "ratio"])})


def _sources_of_kind(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                     kind: str) -> list[str]:
    config = jarvis.load()
    return [source for source in _sources_in_scope(context, jarvis)
            if config.source_kind(source) == kind]


def _source_reachable(asset: dg.AssetsDefinition, kind: str) -> dg.AssetChecksDefinition:
    """A check that every in-scope source of ``kind`` could be read at all (its folder,
    clone or export exists). A warning: what was stored before stays and is published, so the
    other sources' news are not held back by an unmounted drive."""

    @dg.asset_check(asset=asset, name="source_reachable",
                    description=f"Every {kind} source could be read at all (an unmounted "
                                "folder or a vanished clone or export fails this; its data "
                                "stays as stored).")
    def source_reachable(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                         duckdb: DuckDBResource) -> dg.AssetCheckResult:
        with duckdb.get_connection() as conn:
            tables.ensure_schema(conn)
            rows = tables.read_frame(
                conn, "SELECT source, reason FROM ingest_failures WHERE path = ? "
                      "AND list_contains(?, source) ORDER BY source",
                [WHOLE_SOURCE, _sources_of_kind(context, jarvis, kind)]).to_dicts()
        return dg.AssetCheckResult(
            passed=not rows, severity=dg.AssetCheckSeverity.WARN,
            metadata={"unreachable": len(rows),
                      "sources": markdown_table(rows, ["source", "reason"])})

    return source_reachable


def _failed_ratio(asset: dg.AssetsDefinition, name: str, kind: str, table: str,
                  what: str) -> dg.AssetChecksDefinition:
    """A warning when, in some source of ``kind``, the share of items that could not be read
    (``ingest_failures``) among them and the rows of ``table`` exceeds
    ingest.max_failed_ratio."""

    @dg.asset_check(asset=asset, name=name,
                    description=f"Share of {what} that could not be read, per {kind} source, "
                                "stays under ingest.max_failed_ratio (warning).")
    def failed_ratio(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                     duckdb: DuckDBResource) -> dg.AssetCheckResult:
        with duckdb.get_connection() as conn:
            tables.ensure_schema(conn)
            rows = tables.read_frame(conn, f"""
                SELECT s.source,
                       (SELECT count(*) FROM {table} t WHERE t.source = s.source) AS {table},
                       (SELECT count(*) FROM ingest_failures f WHERE f.source = s.source)
                           AS failed
                FROM (SELECT unnest(?::VARCHAR[]) AS source) s
            """, [_sources_of_kind(context, jarvis, kind)]).to_dicts()
        return _ratio_warning(rows, good=table, bad="failed",
                              limit=jarvis.load().ingest.max_failed_ratio)

    return failed_ratio


@dg.asset_check(asset=chunks, blocking=True,
                description="Every note with text in its body has at least one chunk.")
def every_note_has_chunks(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                          duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        missing = tables.read_frame(conn, """
            SELECT n.source, n.path FROM notes n
            WHERE list_contains(?, n.source) AND trim(n.body) <> ''
              AND NOT EXISTS (SELECT 1 FROM chunks c
                              WHERE c.source = n.source AND c.path = n.path)
            ORDER BY n.source, n.path
        """, [_sources_in_scope(context, jarvis)]).to_dicts()
    return dg.AssetCheckResult(
        passed=not missing,
        metadata={"notes_without_chunks": len(missing),
                  "examples": markdown_table(missing, ["source", "path"])},
    )


@dg.asset_check(asset=chunks, blocking=True,
                description="No chunk exceeds the embedding model's token limit, recounted "
                "with the model's own tokenizer.")
def chunks_within_token_limit(context: dg.AssetCheckExecutionContext,
                              jarvis: JarvisConfigResource,
                              duckdb: DuckDBResource) -> dg.AssetCheckResult:
    config = jarvis.load()
    counter = token_counter(config.embedding.model, config.chunking.max_tokens)
    with duckdb.get_connection() as conn:
        rows = tables.read_frame(
            conn, "SELECT chunk_id, path, context, text, token_count FROM chunks "
                  "WHERE list_contains(?, source)", [_sources_in_scope(context, jarvis)])
    recounted = counter.count([embedding_text(chunk_context, text) for chunk_context, text
                               in rows.select("context", "text").iter_rows()])
    over = [{"path": path, "chunk_id": chunk_id, "tokens": tokens}
            for (chunk_id, path), tokens in zip(rows.select("chunk_id", "path").iter_rows(),
                                                recounted)
            if tokens > counter.max_tokens]
    miscounted = sum(stored != actual
                     for stored, actual in zip(rows["token_count"].to_list(), recounted))
    return dg.AssetCheckResult(
        passed=not over and not miscounted,
        metadata={"token_limit": counter.max_tokens, "chunks_checked": rows.height,
                  "largest_chunk_tokens": max(recounted, default=0),
                  "chunks_over_limit": len(over), "stored_counts_wrong": miscounted,
                  "examples": markdown_table(over, ["path", "chunk_id", "tokens"])},
    )


@dg.asset_check(asset=chunks, blocking=True,
                description="Chunk ids are unique: vectors and graph evidence are keyed by them.")
def chunk_ids_unique(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        duplicates = tables.read_frame(conn, """
            SELECT chunk_id, count(*) AS copies, string_agg(DISTINCT path, ', ') AS paths
            FROM chunks GROUP BY chunk_id HAVING count(*) > 1 ORDER BY copies DESC
        """).to_dicts()
    return dg.AssetCheckResult(
        passed=not duplicates,
        metadata={"duplicate_ids": len(duplicates),
                  "examples": markdown_table(duplicates, ["chunk_id", "copies", "paths"])},
    )


@dg.multi_asset_check(specs=[
    dg.AssetCheckSpec("vectors_match_chunks", asset=embeddings, blocking=True,
                      description="Per source, every chunk has exactly one vector."),
    dg.AssetCheckSpec("vector_dimension_matches_model", asset=embeddings, blocking=True,
                      description="Stored vectors have the configured model's dimension."),
    dg.AssetCheckSpec("no_orphan_vectors", asset=embeddings, blocking=True,
                      description="No vector belongs to a chunk the tables do not hold."),
])
def vector_store_consistency(context: dg.AssetCheckExecutionContext,
                             jarvis: JarvisConfigResource, duckdb: DuckDBResource,
                             embedder: EmbedderResource, vectors: VectorStoreResource):
    """Compares the vector collection with the chunks table (one pass for three checks)."""
    sources = _sources_in_scope(context, jarvis)
    with duckdb.get_connection() as conn:
        table_ids = {source: set() for source in sources}
        for source, chunk_id in conn.execute(
                "SELECT source, chunk_id FROM chunks WHERE list_contains(?, source)",
                [sources]).fetchall():
            table_ids[source].add(chunk_id)
    model = embedder.get()
    with vectors.open(model.model, model.dimension) as store:
        stored_ids = {source: store.chunk_ids(source) for source in sources}
        sample = store.vectors(sorted(set().union(*stored_ids.values()))[:100])
    per_source = [{"source": s, "chunks": len(table_ids[s]), "vectors": len(stored_ids[s]),
                   "missing": len(table_ids[s] - stored_ids[s]),
                   "orphans": len(stored_ids[s] - table_ids[s])} for s in sources]
    dimensions = sorted({len(vector) for vector in sample.values()})
    yield dg.AssetCheckResult(
        check_name="vectors_match_chunks",
        passed=all(row["missing"] == 0 and row["chunks"] == row["vectors"] for row in per_source),
        metadata={"per_source": markdown_table(per_source, list(per_source[0]) if per_source
                                               else ["source"])})
    yield dg.AssetCheckResult(
        check_name="vector_dimension_matches_model",
        passed=dimensions in ([], [model.dimension]),
        metadata={"model": model.model, "model_dimension": model.dimension,
                  "stored_dimensions": str(dimensions), "vectors_sampled": len(sample)})
    yield dg.AssetCheckResult(
        check_name="no_orphan_vectors",
        passed=all(row["orphans"] == 0 for row in per_source),
        metadata={"orphans": sum(row["orphans"] for row in per_source)})


@dg.asset_check(asset=knowledge_graph, blocking=True,
                description="Every edge ends at a stored node, in DuckDB and in the graph "
                "store (broken links are recorded apart, never as edges).")
def no_dangling_edges(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                      duckdb: DuckDBResource, graph: GraphStoreResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        dangling = tables.read_frame(conn, """
            SELECT e.source, e.src, e.relation, e.dst FROM graph_edges e
            WHERE list_contains(?, e.source)
              AND (NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.node_key = e.src)
                   OR NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.node_key = e.dst))
        """, [_sources_in_scope(context, jarvis)]).to_dicts()
    with graph.open() as graph_store:
        in_store = graph_store.dangling_edges()
    return dg.AssetCheckResult(
        passed=not dangling and in_store == 0,
        metadata={"dangling_in_tables": len(dangling), "dangling_in_store": in_store,
                  "graph_store": graph.backend,
                  "examples": markdown_table(dangling, ["source", "src", "relation", "dst"])})


@dg.asset_check(asset=knowledge_graph, blocking=True,
                description="Every edge carries the line it was read from, and every chunk it "
                "cites as evidence exists (frontmatter edges cite no chunk: it is not chunked).")
def every_edge_has_evidence(context: dg.AssetCheckExecutionContext,
                            jarvis: JarvisConfigResource,
                            duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        missing = tables.read_frame(conn, """
            WITH cited AS (
                SELECT edge_key, unnest(evidence) AS chunk_id FROM graph_edges
                WHERE list_contains($1, source)
            ), unknown AS (
                SELECT edge_key, count(*) AS unknown_chunks FROM cited
                WHERE chunk_id NOT IN (SELECT chunk_id FROM chunks) GROUP BY edge_key
            )
            SELECT e.origin, e.relation, e.dst,
                   coalesce(trim(e.evidence_text), '') = '' AS no_text,
                   coalesce(u.unknown_chunks, 0) AS unknown_chunks
            FROM graph_edges e LEFT JOIN unknown u USING (edge_key)
            WHERE list_contains($1, e.source)
              AND (coalesce(trim(e.evidence_text), '') = '' OR u.unknown_chunks > 0)
        """, [_sources_in_scope(context, jarvis)]).to_dicts()
    return dg.AssetCheckResult(
        passed=not missing,
        metadata={"edges_without_evidence": len(missing),
                  "examples": markdown_table(missing, ["origin", "relation", "dst", "no_text",
                                                       "unknown_chunks"])})


@dg.asset_check(asset=knowledge_graph, description="Share of links that resolve to nothing or "
                "to several notes, per vault, stays under graph.max_broken_link_ratio (warning).")
def broken_link_ratio(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                      duckdb: DuckDBResource) -> dg.AssetCheckResult:
    limit = jarvis.load().graph.max_broken_link_ratio
    with duckdb.get_connection() as conn:
        rows = tables.read_frame(conn, """
            SELECT s.source,
                   (SELECT count(*) FROM graph_edges e WHERE e.source = s.source
                      AND e.relation IN ('LINKS_TO', 'EMBEDS')) AS links,
                   (SELECT count(*) FROM graph_broken_links b WHERE b.source = s.source) AS broken
            FROM (SELECT unnest(?::VARCHAR[]) AS source) s
        """, [_sources_in_scope(context, jarvis)]).to_dicts()
    return _ratio_warning(rows, good="links", bad="broken", limit=limit)


@dg.asset_check(asset=keyword_index, blocking=True,
                description="Per source, the keyword index holds exactly the chunk ids of the "
                "chunks table, each once.")
def keyword_index_matches_chunks(context: dg.AssetCheckExecutionContext,
                                 jarvis: JarvisConfigResource,
                                 duckdb: DuckDBResource) -> dg.AssetCheckResult:
    sources = _sources_in_scope(context, jarvis)
    with duckdb.get_connection() as conn:
        expected: dict[str, set[str]] = {source: set() for source in sources}
        for source, chunk_id in conn.execute(
                "SELECT source, chunk_id FROM chunks WHERE list_contains(?, source)",
                [sources]).fetchall():
            expected[source].add(chunk_id)
    rows = []
    with KeywordIndex(jarvis.load().keyword_path) as index:
        for source in sources:
            ledger = index.chunk_ids(source)
            rows.append({"source": source, "chunks": len(expected[source]),
                         "indexed": index.indexed_count(source),
                         "missing": len(expected[source] - ledger),
                         "extra": len(ledger - expected[source])})
    wrong = [row for row in rows if row["missing"] or row["extra"]
             or row["indexed"] != row["chunks"]]
    return dg.AssetCheckResult(
        passed=not wrong,
        metadata={"sources_checked": len(rows), "sources_wrong": len(wrong),
                  "per_source": markdown_table(rows, ["source", "chunks", "indexed", "missing",
                                                      "extra"])})


asset_checks = [_failed_ratio(raw_notes, "failed_file_ratio", "vault", "notes", "files"),
                _failed_ratio(raw_tickets, "failed_ticket_ratio", "tickets", "tickets",
                              "export files and issues"),
                *(_source_reachable(asset, kind) for asset, kind in (
                    (raw_notes, "vault"), (raw_repository, "repo"),
                    (raw_tickets, "tickets"))),
                every_note_has_chunks,
                chunks_within_token_limit,
                chunk_ids_unique, vector_store_consistency, no_dangling_edges, *cross_link_checks,
                every_edge_has_evidence, broken_link_ratio, keyword_index_matches_chunks]
