"""Vector layer: one embedding per chunk, in Qdrant, for the configured model only."""

import time

import dagster as dg

from jarvis_assets.automation import follows_upstream
from jarvis_assets.partitions import source_partitions
from jarvis_assets.progress import logged_progress
from jarvis_core.stores.vectors.sync import read_payload_rows, sync_source
from jarvis_resources import EmbedderResource, TablesResource, VectorStoreResource

VECTORS_POOL = "jarvis_vectors"


@dg.asset(
    partitions_def=source_partitions,
    deps=["chunks"],
    group_name="vectors",
    kinds={"qdrant", "pytorch"},
    pool=VECTORS_POOL,
    automation_condition=follows_upstream,
)
def embeddings(context: dg.AssetExecutionContext, tables: TablesResource,
               embedder: EmbedderResource, vectors: VectorStoreResource) -> dg.MaterializeResult:
    """Vectors of one source's chunks: only chunks without a vector for the current model
    are embedded (the model is loaded only then), vectors of removed chunks are deleted.
    Point ids derive from chunk ids."""
    source = context.partition_key
    started = time.perf_counter()
    with tables.get_connection() as conn:
        rows = read_payload_rows(conn, source)
    with vectors.open() as vector_store, logged_progress(context):
        report = sync_source(source, rows, vector_store, embedder)
        stored = vector_store.count(source)
    context.log.info(f"{source}: embedded {report.embedded}, reused {report.reused}, "
                     f"deleted {report.deleted} ({report.chunks_per_second} chunks/s)")
    return dg.MaterializeResult(metadata={
        "embedded": report.embedded, "reused": report.reused, "deleted": report.deleted,
        "embedded_from_cache": embedder.cache_hits,
        "dagster/row_count": stored,
        "chunks_per_second": report.chunks_per_second,
        "embed_seconds": round(report.embed_seconds, 3),
        "total_seconds": round(time.perf_counter() - started, 3),
        "model": embedder.model, "backend": embedder.backend or "(not loaded)",
        "precision": embedder.choice.precision, "device": embedder.choice.device,
        "batch_size": embedder.batch_size, "backend_reason": embedder.choice.reason,
        "dimension": embedder.dimension,
        "vector_store": vectors.backend, "collection": vectors.collection,
    })
