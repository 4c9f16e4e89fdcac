"""Graph layer across sources: references one source makes to another's tickets, commits
and files become edges once their target exists, whatever order the sources refresh in."""

from collections import Counter

import dagster as dg

from jarvis_assets.graph import knowledge_graph
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_core.graph.cross_source import apply_to_store, plan_links, read_inputs, write_tables
from jarvis_core.graph.sync import edge_row
from jarvis_core.progress import Stopwatch
from jarvis_resources import GraphStoreResource, TablesResource


@dg.asset(
    deps=[knowledge_graph],
    group_name="graph",
    kinds={"duckdb", "sqlite", "neo4j"},
    automation_condition=dg.AutomationCondition.eager(),
)
def cross_source_links(context: dg.AssetExecutionContext, tables: TablesResource,
                       graph: GraphStoreResource) -> dg.MaterializeResult:
    """Edges from notes, commits, tickets, mail and pages to the tickets, commits, files and
    code symbols they cite in other sources (commit -FIXES-> ticket, note -MENTIONS-> commit,
    ticket -MENTIONS-> file, ticket -MENTIONS-> symbol, ticket -BLOCKS-> ticket of another
    set...), each with the citing chunks as evidence, and SAME_AS between person nodes that
    sources keyed apart but that are one person.

    Every source's graph run records its references in ``graph_references``; this asset
    resolves all of them against the nodes of every source, rewrites the cross-source edges
    of citing documents whose resolution changed, and lists what resolves to nothing (or to
    several nodes) in ``unresolved_references``.
    """
    watch = Stopwatch()
    with tables.get_connection() as conn:
        inputs = read_inputs(conn)
    links = plan_links(inputs)
    with graph.open() as graph_store:
        dangling = apply_to_store(graph_store, links, inputs.nodes)
    with tables.get_connection() as conn:
        write_tables(conn, links)
    watch.lap("link")
    counts = {"references": len(inputs.references), "edges": len(links.edges),
              "origins_rewritten": len(links.changed), "unresolved": len(links.unresolved)}
    context.log.info(f"cross-source links {counts}")
    return dg.MaterializeResult(metadata={
        **counts,
        "dagster/row_count": len(links.edges),
        "dangling_edges_in_store": dangling,
        "edges_by_relation": counts_table(dict(sorted(
            Counter(edge.relation for edge in links.edges).items()))),
        "unresolved_by_reason": counts_table(dict(sorted(
            Counter(row["reason"] for row in links.unresolved).items()))),
        "unresolved_examples": markdown_table(
            links.unresolved, ["source", "origin", "written", "reason", "line"], limit=20),
        "edge_examples": markdown_table([edge_row(edge) for edge in links.edges],
                                        ["src", "relation", "dst", "evidence_text"], limit=20),
        "seconds": watch.seconds["link_seconds"],
    })
