"""Checks of the vector layer: one vector per chunk, of the model's dimension, no orphans."""

import dagster as dg

from jarvis_assets.embeddings import embeddings
from jarvis_assets.metadata import markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_resources import EmbedderResource, TablesResource, VectorStoreResource


@dg.multi_asset_check(
    specs=[
        dg.AssetCheckSpec("vectors_match_chunks", asset=embeddings, blocking=True,
                          partitions_def=source_partitions,
                          description="Every chunk of the source has exactly one vector."),
        dg.AssetCheckSpec("vector_dimension_matches_model", asset=embeddings, blocking=True,
                          partitions_def=source_partitions,
                          description="Stored vectors have the configured model's dimension."),
        dg.AssetCheckSpec("no_orphan_vectors", asset=embeddings, blocking=True,
                          partitions_def=source_partitions,
                          description="No vector belongs to a chunk the tables do not hold."),
    ],
)
def vector_store_consistency(context: dg.AssetCheckExecutionContext, tables: TablesResource,
                             embedder: EmbedderResource, vectors: VectorStoreResource):
    """Compares the vector collection with the chunks table (one pass for three checks)."""
    source = context.partition_key
    with tables.get_connection() as conn:
        table_ids = {chunk_id for (chunk_id,) in conn.execute(
            "SELECT chunk_id FROM chunks WHERE source = ?", [source]).fetchall()}
    with vectors.open() as store:
        stored_ids = store.chunk_ids(source)
        sample = store.vectors(sorted(stored_ids)[:100])
    row = {"source": source, "chunks": len(table_ids), "vectors": len(stored_ids),
           "missing": len(table_ids - stored_ids), "orphans": len(stored_ids - table_ids)}
    dimensions = sorted({len(vector) for vector in sample.values()})
    yield dg.AssetCheckResult(
        check_name="vectors_match_chunks",
        passed=row["missing"] == 0 and row["chunks"] == row["vectors"],
        metadata={"per_source": markdown_table([row], list(row))})
    yield dg.AssetCheckResult(
        check_name="vector_dimension_matches_model",
        passed=dimensions in ([], [embedder.dimension]),
        metadata={"model": embedder.model, "model_dimension": embedder.dimension,
                  "stored_dimensions": str(dimensions), "vectors_sampled": len(sample)})
    yield dg.AssetCheckResult(
        check_name="no_orphan_vectors", passed=row["orphans"] == 0,
        metadata={"orphans": row["orphans"]})
