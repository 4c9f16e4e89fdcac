"""Graph layer: every source's documents, people, tags and links as typed nodes and edges
with evidence."""

import dagster as dg

from jarvis_assets.automation import follows_upstream
from jarvis_assets.embeddings import embeddings
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.graph.similarity import similar_note_edges, with_inferred
from jarvis_core.graph.sync import (
    apply_to_store,
    plan_update,
    read_inputs,
    store_in_sync,
    write_tables,
)
from jarvis_core.progress import Stopwatch
from jarvis_core.sources.extraction import NO_GRAPH
from jarvis_core.sources.plan import utc_now
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
    config, watch, now = jarvis.load(), Stopwatch(), utc_now()
    kind = config.kind_of(source)
    extractor = kind.pipeline.graph if kind is not None else NO_GRAPH
    with tables.get_connection() as conn:
        inputs = read_inputs(conn, source, extractor, config.resources.batch_rows)
    settings, inferred = config.graph, []
    extracted = extractor.extract(source, config.sources.get(source), settings, inputs.rows,
                                  inputs.chunk_rows)
    if settings.similarity_top_k and kind is not None and kind.name == "vault":
        with vectors.open() as vector_store:
            stored = vector_store.vectors([row["chunk_id"] for row in inputs.chunk_rows])
        inferred = similar_note_edges(source, inputs.chunk_rows, stored,
                                      settings.similarity_top_k, settings.similarity_threshold)
    fingerprints = with_inferred(extracted.fingerprints, inferred)
    with graph.open() as graph_store:
        in_sync = store_in_sync(graph_store.document_keys(source), inputs.previous)
        update = plan_update(extracted, inferred, fingerprints, inputs.previous, in_sync)
        dangling = apply_to_store(graph_store, update)
    watch.lap("extract")
    with tables.get_connection() as conn:
        figures = write_tables(conn, source, extracted, update, inputs.first_seen, now,
                               config.resources.batch_rows)
    watch.lap("write")
    counts = {**update.counts().as_dict(), "nodes": len(extracted.nodes),
              "edges": figures["edges"], "inferred_edges": len(inferred),
              "broken_links": figures["broken_links"]}
    context.log.info(f"{source}: graph {counts}")
    return dg.MaterializeResult(metadata={
        **counts, **watch.seconds,
        "source_kind": kind.name if kind is not None else "(not configured)",
        "dagster/row_count": figures["edges"],
        "graph_store": graph.backend,
        "dangling_edges_in_store": dangling,
        "edges_by_relation": counts_table(figures["edges_by_relation"]),
        "broken_link_examples": markdown_table(
            [vars(b) for b in extracted.broken], ["origin", "target", "reason", "line"]),
    })
