"""Vector layer: one embedding per chunk, in Qdrant, for the configured model only."""

import time

import dagster as dg

from jarvis_assets.automation import follows_upstream
from jarvis_assets.partitions import source_partitions
from jarvis_assets.progress import logged_progress
from jarvis_core.stores.chunk_rows import TableRows
from jarvis_core.stores.vectors.sync import sync_source
from jarvis_resources import EmbedderResource, TablesResource, VectorStoreResource


@dg.asset(
    partitions_def=source_partitions,
    deps=["chunks"],
    group_name="vectors",
    kinds={"qdrant", "pytorch"},
    automation_condition=follows_upstream,
)
def embeddings(context: dg.AssetExecutionContext, tables: TablesResource,
               embedder: EmbedderResource, vectors: VectorStoreResource) -> dg.MaterializeResult:
    """Vectors of one source's chunks: only chunks without a vector for the current model
    are embedded (the model is loaded only then), vectors of removed chunks are deleted.
    Point ids derive from chunk ids. The store is held only while a batch is written, so
    runs of other sources write it between batches."""
    source = context.partition_key
    started = time.perf_counter()
    with vectors.open() as vector_store:  # healed once; the batches skip the check
        held = vector_store.chunk_ids(source)
    with logged_progress(context):
        report = sync_source(source, TableRows(tables.get_connection, source), held,
                             lambda: vectors.open(heal=False), embedder)
    stored = report.reused + report.embedded  # checked against the store by vectors_match_chunks
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
