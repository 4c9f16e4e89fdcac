"""Text layer: heading-aware chunks that fit the embedding model, for every source kind."""

import dagster as dg

from jarvis_assets.automation import follows_upstream
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.progress import Stopwatch
from jarvis_core.sources.kind import SourceKind
from jarvis_core.text.documents import chunk_config_id, chunk_source
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
        run = chunk_source(tables.get_connection, source, config.kind_of(source), counter,
                           config.chunking.overlap_tokens, config_id,
                           config.resources.batch_documents)
        watch.lap("chunk")
        for path, reason in run.failed:
            context.log.warning(f"{source}/{path}: not chunked: {reason}")
        context.log.info(f"{source}: chunks {run.counts}")
        return dg.MaterializeResult(metadata={
            **run.counts, **watch.seconds,
            "dagster/row_count": run.total,
            "token_limit": counter.max_tokens,
            "largest_chunk_tokens": run.max_tokens,
            "chunk_config": config_id,
            "summary": counts_table(run.counts),
            "preview": markdown_table(run.preview,
                                      ["path", "heading_path", "token_count", "text"]),
        })

    return chunks
