"""Graph layer: every source's documents, people, tags and links as typed nodes and edges
with evidence."""

import dagster as dg

from jarvis_assets.automation import follows_upstream
from jarvis_assets.embeddings import embeddings
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.graph.similarity import similar_note_edges
from jarvis_core.graph.sync import sync_graph
from jarvis_core.progress import Stopwatch
from jarvis_core.sources.extraction import NO_GRAPH
from jarvis_core.sources.plan import utc_now
from jarvis_core.stores.tables import read_dicts
from jarvis_resources import (
    GraphStoreResource,
    JarvisConfigResource,
    TablesResource,
    VectorStoreResource,
)


@dg.asset(
    partitions_def=source_partitions,
    deps=["chunks", embeddings],
    group_name="graph",
    kinds={"duckdb", "sqlite", "neo4j"},
    automation_condition=follows_upstream,
)
def knowledge_graph(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
                    tables: TablesResource, graph: GraphStoreResource,
                    vectors: VectorStoreResource) -> dg.MaterializeResult:
    """Nodes and edges of one source, every edge with the chunks and line it came from.

    Each source kind has its extractor (its ``SourceKind``'s pipeline), all returning one
    shape. In vaults, links resolve the way Obsidian resolves them; unresolved and
    ambiguous targets are recorded in ``graph_broken_links``. With
    ``graph.similarity_top_k`` set, notes whose mean chunk vectors are close get inferred
    SIMILAR_TO edges. Only the subgraphs of documents whose output changed (an edit, a link
    that resolves differently, a new similarity) are rewritten, in DuckDB and the graph store.
    """
    source = context.partition_key
    config, watch = jarvis.load(), Stopwatch()
    kind = config.kind_of(source)
    extractor = kind.pipeline.graph if kind is not None else NO_GRAPH
    settings = config.graph

    def extract(rows, chunk_rows):
        return extractor.extract(source, config.sources.get(source), settings, rows, chunk_rows)

    with graph.open() as graph_store:
        run = sync_graph(source, extractor, extract, tables.get_connection, graph_store,
                         now=utc_now(), batch_documents=config.resources.batch_documents,
                         batch_rows=config.resources.batch_rows,
                         inferred=_similarities(source, config, tables, vectors)
                         if settings.similarity_top_k and kind is not None
                         and kind.name == "vault" else [])
    watch.lap("sync")
    counts = {**run.counts.as_dict(), "nodes": run.nodes, "edges": run.figures["edges"],
              "inferred_edges": run.inferred, "broken_links": run.figures["broken_links"]}
    context.log.info(f"{source}: graph {counts}")
    return dg.MaterializeResult(metadata={
        **counts, **watch.seconds,
        "source_kind": kind.name if kind is not None else "(not configured)",
        "dagster/row_count": run.figures["edges"],
        "graph_store": graph.backend,
        "dangling_edges_in_store": run.dangling,
        "edges_by_relation": counts_table(run.figures["edges_by_relation"]),
        "broken_link_examples": markdown_table(
            [vars(b) for b in run.broken], ["origin", "target", "reason", "line"]),
    })


def _similarities(source: str, config, tables: TablesResource,
                  vectors: VectorStoreResource) -> list:
    """SIMILAR_TO edges between the source's notes whose mean chunk vectors are close."""
    with tables.get_connection() as conn:
        chunk_rows = read_dicts(conn, "SELECT chunk_id, doc_key FROM chunks WHERE source = ?",
                                [source], config.resources.batch_rows)
    with vectors.open() as vector_store:
        stored = vector_store.vectors([row["chunk_id"] for row in chunk_rows])
    return similar_note_edges(source, chunk_rows, stored, config.graph.similarity_top_k,
                              config.graph.similarity_threshold)
