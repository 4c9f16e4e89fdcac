"""Graph layer across sources: references one source makes to another's tickets, commits
and files become edges once their target exists, whatever order the sources refresh in."""

import dagster as dg

from jarvis_assets.graph import knowledge_graph
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_core.graph.cross_source import EXAMPLES, link_sources
from jarvis_core.graph.sync import edge_row
from jarvis_core.progress import Stopwatch
from jarvis_resources import GraphStoreResource, JarvisConfigResource, TablesResource


@dg.asset(
    deps=[knowledge_graph],
    group_name="graph",
    kinds={"duckdb", "sqlite", "neo4j"},
    automation_condition=dg.AutomationCondition.eager(),
)
def cross_source_links(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
                       tables: TablesResource, graph: GraphStoreResource
                       ) -> dg.MaterializeResult:
    """Edges from notes, commits, tickets, mail and pages to the tickets, commits, files and
    code symbols they cite in other sources (commit -FIXES-> ticket, note -MENTIONS-> commit,
    ticket -MENTIONS-> file, ticket -MENTIONS-> symbol, ticket -BLOCKS-> ticket of another
    set...), each with the citing chunks as evidence, and SAME_AS between person nodes that
    sources keyed apart but that are one person.

    Every source's graph run records its references in ``graph_references``; this asset
    resolves all of them against the nodes of every source, the references of a batch of
    citing documents at a time, rewrites the cross-source edges of citing documents whose
    resolution changed, and lists what resolves to nothing (or to several nodes) in
    ``unresolved_references``.
    """
    watch, resources = Stopwatch(), jarvis.load().resources
    with graph.open() as graph_store:
        run = link_sources(tables.get_connection, graph_store,
                           origins=resources.batch_documents, batch_rows=resources.batch_rows)
    watch.lap("link")
    counts = {"references": run.references, "edges": run.edges,
              "origins_rewritten": run.origins_rewritten, "unresolved": run.unresolved}
    context.log.info(f"cross-source links {counts}")
    return dg.MaterializeResult(metadata={
        **counts,
        "dagster/row_count": run.edges,
        "dangling_edges_in_store": run.dangling,
        "edges_by_relation": counts_table(dict(sorted(run.edges_by_relation.items()))),
        "unresolved_by_reason": counts_table(dict(sorted(run.unresolved_by_reason.items()))),
        "unresolved_examples": markdown_table(
            run.unresolved_examples, ["source", "origin", "written", "reason", "line"],
            limit=EXAMPLES),
        "edge_examples": markdown_table([edge_row(edge) for edge in run.edge_examples],
                                        ["src", "relation", "dst", "evidence_text"],
                                        limit=EXAMPLES),
        "seconds": watch.seconds["link_seconds"],
    })
