"""Keyword layer: a BM25 index of every chunk, beside the vectors, for keyword and hybrid
search."""

import dagster as dg

from jarvis_assets.automation import follows_upstream
from jarvis_assets.metadata import counts_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.progress import Stopwatch
from jarvis_core.stores.chunk_rows import TableRows
from jarvis_resources import JarvisConfigResource, KeywordIndexResource, TablesResource


@dg.asset(
    partitions_def=source_partitions,
    deps=["chunks"],
    group_name="text",
    kinds={"tantivy", "python"},
    automation_condition=follows_upstream,
)
def keyword_index(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
                  tables: TablesResource, keyword: KeywordIndexResource
                  ) -> dg.MaterializeResult:
    """The Tantivy BM25 index of one source's chunks and document names.

    Follows the chunks table per chunk id: new ids are added, vanished ones deleted, and a
    chunk whose title, tags or dates changed under the same id is re-indexed. The chunks
    are read a page at a time, never the whole source at once.
    """
    source = context.partition_key
    watch = Stopwatch()
    with keyword.open() as index:
        # pages of resources.batch_rows: each page's read joins the source's documents again
        report = index.sync_source(source, TableRows(
            tables.get_connection, source, page=jarvis.load().resources.batch_rows))
        indexed = index.indexed_count(source)
    watch.lap("index")
    counts = report.as_dict()
    context.log.info(f"{source}: keyword index {counts}")
    return dg.MaterializeResult(metadata={
        **counts, **watch.seconds,
        "dagster/row_count": indexed,
        "summary": counts_table({k: v for k, v in counts.items() if k != "documents"}),
    })
