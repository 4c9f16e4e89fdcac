"""Serving layer: an immutable, versioned copy of what the query side reads."""

import time

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_assets.analytics import vault_analytics
from jarvis_assets.automation import follows_upstream
from jarvis_assets.cross_links import cross_source_links
from jarvis_assets.embeddings import VECTORS_POOL, embeddings
from jarvis_assets.graph import knowledge_graph
from jarvis_assets.keyword_index import keyword_index
from jarvis_core.stores import serving
from jarvis_core.stores.keyword import KeywordIndex
from jarvis_resources import (
    EmbedderResource,
    GraphStoreResource,
    JarvisConfigResource,
    VectorStoreResource,
)

# Table -> the query that fills its serving copy (note bodies stay out: read-note reads files).
SERVING_TABLES = {
    "notes": "SELECT * EXCLUDE (body) FROM notes",
    "chunks": "SELECT * FROM chunks",
    "attachments": "SELECT * FROM attachments",
    "ingest_failures": "SELECT * FROM ingest_failures",
    "graph_nodes": "SELECT * FROM graph_nodes",
    "graph_edges": "SELECT * FROM graph_edges",
    "graph_broken_links": "SELECT * FROM graph_broken_links",
    "chunk_mentions": "SELECT * FROM chunk_mentions",
    "tickets": "SELECT * EXCLUDE (text) FROM tickets",
    "unresolved_references": "SELECT * FROM unresolved_references",
    # what the repository and ticket sensors compare with (last ingested head, export hashes)
    "repo_state": "SELECT * FROM repo_state",
    "ticket_files": "SELECT * FROM ticket_files",
    # the whole snapshot history (trends), and the per-note rows of each newest snapshot
    "analytics_snapshots": "SELECT * FROM analytics_snapshots",
    "analytics_notes": "SELECT n.* FROM analytics_notes n JOIN (SELECT source, "
                       "arg_max(snapshot_id, generated_at) AS snapshot_id "
                       "FROM analytics_snapshots GROUP BY source) USING (source, snapshot_id)",
}


@dg.asset(
    deps=[embeddings, knowledge_graph, cross_source_links, vault_analytics, keyword_index],
    group_name="serving",
    kinds={"duckdb", "qdrant"},
    pool=VECTORS_POOL,
    automation_condition=follows_upstream,
)
def serving_snapshot(
    context: dg.AssetExecutionContext, jarvis: JarvisConfigResource, duckdb: DuckDBResource,
    embedder: EmbedderResource, vectors: VectorStoreResource, graph: GraphStoreResource,
) -> dg.MaterializeResult:
    """Publishes the tables, vectors and graph as a new version that query processes switch to
    atomically, so they never read a store that a refresh is writing."""
    config = jarvis.load()
    started = time.perf_counter()
    name, staging = serving.begin_version(config.data_dir)
    try:
        with duckdb.get_connection() as conn:
            serving.copy_tables(conn, staging, SERVING_TABLES, serving.SERVING_INDEXES)
            chunk_count, chunks_hash = conn.execute(
                "SELECT count(*), md5(coalesce(string_agg(chunk_id, ',' ORDER BY chunk_id), '')) "
                "FROM chunks").fetchone()
        model = embedder.get()
        with vectors.open(model.model, model.dimension) as store:
            vector_counts = store.counts_by_source()
            collection = store.collection
            if vectors.backend == "edge":
                store.publish_copy(staging / serving.VECTORS_DIR)
        if graph.backend == "embedded":
            with graph.open() as graph_store:
                graph_store.publish_copy(staging / serving.GRAPH_FILE)
        with KeywordIndex(config.keyword_path) as keyword:
            keyword_counts = keyword.counts()
            keyword.publish_copy(staging / serving.KEYWORD_DIR)
        version = serving.commit_version(config.data_dir, name, staging, {
            "model": model.model, "dimension": model.dimension,
            "vector_backend": vectors.backend, "collection": collection,
            "graph_backend": graph.backend,
            "chunks": chunk_count, "chunks_hash": chunks_hash, "vectors": vector_counts,
            "keyword": keyword_counts,
        })
    except BaseException:
        serving.abandon_version(staging)
        raise
    context.log.info(f"published serving version {version.name}")
    return dg.MaterializeResult(metadata={
        "version": version.name, "path": dg.MetadataValue.path(str(version.path)),
        "chunks": chunk_count, "vectors": sum(vector_counts.values()),
        "vectors_by_source": dg.MetadataValue.json(vector_counts),
        "collection": collection, "publish_seconds": round(time.perf_counter() - started, 3),
    })
