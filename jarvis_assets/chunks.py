"""Text layer: heading-aware chunks that fit the embedding model, for every source kind."""

import dagster as dg

from jarvis_assets.automation import follows_upstream
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.progress import Stopwatch
from jarvis_core.sources.kind import SourceKind
from jarvis_core.text.documents import (
    chunk_config_id,
    plan_chunks,
    read_stale_documents,
    write_chunks,
)
from jarvis_core.text.tokens import token_counter
from jarvis_resources import JarvisConfigResource, TablesResource


def chunks_asset(kinds: tuple[SourceKind, ...]) -> dg.AssetsDefinition:
    """The chunks asset, downstream of every kind's raw assets (a source's partition maps to
    the raw assets of its own kind)."""

    @dg.asset(
        partitions_def=source_partitions,
        deps=[dg.AssetDep(asset.name, partition_mapping=dg.IdentityPartitionMapping())
              for kind in kinds for asset in kind.raw_assets],
        group_name="text",
        kinds={"duckdb", "python"},
        automation_condition=follows_upstream,
    )
    def chunks(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
               tables: TablesResource) -> dg.MaterializeResult:
        """Chunks of one source's documents, each within the embedding model's token limit.

        Tokens are counted with the model's own tokenizer; chunk ids derive from the
        document, heading path and text, so unchanged chunks keep their ids across runs.
        """
        source = context.partition_key
        config = jarvis.load()
        watch = Stopwatch()
        counter = token_counter(config.embedding.model, config.chunking.max_tokens)
        config_id = chunk_config_id(config.embedding.model, counter.max_tokens,
                                    config.chunking.overlap_tokens)
        with tables.get_connection() as conn:
            stale = read_stale_documents(conn, source, config.kind_of(source), config_id)
        plan = plan_chunks(source, stale, counter, config.chunking.overlap_tokens, config_id)
        watch.lap("chunk")
        for path, reason in plan.failed:
            context.log.warning(f"{source}/{path}: not chunked: {reason}")
        with tables.get_connection() as conn:
            total, max_tokens = write_chunks(conn, plan)
        watch.lap("write")
        counts = plan.counts()
        context.log.info(f"{source}: chunks {counts}")
        return dg.MaterializeResult(metadata={
            **counts, **watch.seconds,
            "dagster/row_count": total,
            "token_limit": counter.max_tokens,
            "largest_chunk_tokens": max_tokens,
            "chunk_config": config_id,
            "summary": counts_table(counts),
            "preview": markdown_table(plan.chunk_rows,
                                      ["path", "heading_path", "token_count", "text"]),
        })

    return chunks
