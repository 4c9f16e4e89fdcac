"""Keyword layer: a BM25 index of every chunk, beside the vectors, for keyword and hybrid
search."""

import time

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_assets.automation import follows_upstream
from jarvis_assets.chunks import chunks
from jarvis_assets.metadata import counts_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.stores import tables
from jarvis_core.stores.keyword import KeywordIndex
from jarvis_core.stores.vectors.sync import PAYLOAD_SQL
from jarvis_resources import JarvisConfigResource


@dg.asset(
    partitions_def=source_partitions,
    deps=[chunks],
    group_name="text",
    kinds={"tantivy", "python"},
    automation_condition=follows_upstream,
)
def keyword_index(
    context: dg.AssetExecutionContext, jarvis: JarvisConfigResource, duckdb: DuckDBResource
) -> dg.MaterializeResult:
    """The Tantivy BM25 index of one source's chunks and document names.

    Follows the chunks table per chunk id: new ids are added, vanished ones deleted, and a
    chunk whose title, tags or dates changed under the same id is re-indexed.
    """
    source = context.partition_key
    config = jarvis.load()
    started = time.perf_counter()
    with duckdb.get_connection() as conn:
        tables.ensure_schema(conn)
        rows = tables.read_frame(conn, PAYLOAD_SQL, [source])
    read_at = time.perf_counter()
    with KeywordIndex(config.keyword_path) as index:
        report = index.sync_source(source, rows)
        indexed = index.indexed_count(source)
    counts = report.as_dict()
    context.log.info(f"{source}: keyword index {counts}")
    return dg.MaterializeResult(metadata={
        **counts,
        "dagster/row_count": indexed,
        "read_seconds": round(read_at - started, 3),
        "index_seconds": round(time.perf_counter() - read_at, 3),
        "summary": counts_table({k: v for k, v in counts.items() if k != "documents"}),
    })
