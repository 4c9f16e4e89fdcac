"""Vector layer: one embedding per chunk, in Qdrant, for the configured model only."""

import time

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_assets.automation import follows_upstream
from jarvis_assets.chunks import chunks
from jarvis_assets.partitions import source_partitions
from jarvis_core.stores import tables
from jarvis_core.stores.vectors.sync import PAYLOAD_SQL, sync_source
from jarvis_resources import EmbedderResource, VectorStoreResource

VECTORS_POOL = "jarvis_vectors"


@dg.asset(
    partitions_def=source_partitions,
    deps=[chunks],
    group_name="vectors",
    kinds={"qdrant", "pytorch"},
    pool=VECTORS_POOL,
    automation_condition=follows_upstream,
)
def embeddings(
    context: dg.AssetExecutionContext, duckdb: DuckDBResource, embedder: EmbedderResource,
    vectors: VectorStoreResource,
) -> dg.MaterializeResult:
    """Vectors of one source's chunks: only chunks without a vector for the current model
    are embedded, vectors of removed chunks are deleted. Point ids derive from chunk ids."""
    source = context.partition_key
    started = time.perf_counter()
    with duckdb.get_connection() as conn:
        rows = tables.read_frame(conn, PAYLOAD_SQL, [source])
    model = embedder.get()
    with vectors.open(model.model, model.dimension) as vector_store:
        report = sync_source(source, rows, vector_store, model)
        stored = vector_store.count(source)
        collection = vector_store.collection
    context.log.info(f"{source}: embedded {report.embedded}, reused {report.reused}, "
                     f"deleted {report.deleted} ({report.chunks_per_second} chunks/s)")
    return dg.MaterializeResult(metadata={
        "embedded": report.embedded, "reused": report.reused, "deleted": report.deleted,
        "dagster/row_count": stored,
        "chunks_per_second": report.chunks_per_second,
        "embed_seconds": round(report.embed_seconds, 3),
        "total_seconds": round(time.perf_counter() - started, 3),
        "model": model.model, "backend": model.backend, "dimension": model.dimension,
        "vector_store": vectors.backend, "collection": collection,
    })
