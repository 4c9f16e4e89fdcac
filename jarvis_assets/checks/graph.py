"""Checks of the graph layer: no edge dangles, every edge carries its evidence, few links
are broken; the same rules for the edges between sources."""

import dagster as dg

from jarvis_assets.cross_links import cross_source_links
from jarvis_assets.graph import knowledge_graph
from jarvis_assets.metadata import markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_assets.sources import ratio_warning
from jarvis_core.graph.cross_source import WARN_REASONS
from jarvis_core.sources.references import CROSS_EXTRACTOR
from jarvis_core.stores.tables import read_dicts
from jarvis_resources import GraphStoreResource, JarvisConfigResource, TablesResource

# Edges (of the edges selected by $1) whose evidence text is empty or that cite chunks the
# tables do not hold.
_WITHOUT_EVIDENCE = """
    WITH selected AS ({selection}), cited AS (
        SELECT edge_key, unnest(evidence) AS chunk_id FROM selected
    ), unknown AS (
        SELECT edge_key, count(*) AS unknown_chunks FROM cited
        WHERE chunk_id NOT IN (SELECT chunk_id FROM chunks) GROUP BY edge_key
    )
    SELECT e.origin, e.relation, e.dst,
           NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.node_key = e.src)
           OR NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.node_key = e.dst) AS dangling,
           coalesce(trim(e.evidence_text), '') = '' AS no_text,
           coalesce(u.unknown_chunks, 0) AS unknown_chunks
    FROM selected e LEFT JOIN unknown u USING (edge_key)
"""
_SOURCE_EDGES = "SELECT * FROM graph_edges WHERE source = $1"
_CROSS_EDGES = "SELECT * FROM graph_edges WHERE extractor = $1"


def _judged_edges(conn, selection: str, condition: str, parameter: str) -> list[dict]:
    """The selected edges that meet ``condition`` over dangling, no_text, unknown_chunks."""
    sql = _WITHOUT_EVIDENCE.format(selection=selection)
    return read_dicts(conn, f"SELECT * FROM ({sql}) WHERE {condition}", [parameter])


@dg.asset_check(asset=knowledge_graph, blocking=True, partitions_def=source_partitions,
                description="Every edge ends at a stored node, in DuckDB and in the graph "
                "store (broken links are recorded apart, never as edges).")
def no_dangling_edges(context: dg.AssetCheckExecutionContext, tables: TablesResource,
                      graph: GraphStoreResource) -> dg.AssetCheckResult:
    with tables.get_connection() as conn:
        dangling = _judged_edges(conn, _SOURCE_EDGES, "dangling", context.partition_key)
    with graph.open() as graph_store:
        in_store = graph_store.dangling_edges()
    return dg.AssetCheckResult(
        passed=not dangling and in_store == 0,
        metadata={"dangling_in_tables": len(dangling), "dangling_in_store": in_store,
                  "graph_store": graph.backend,
                  "examples": markdown_table(dangling, ["origin", "relation", "dst"])})


@dg.asset_check(asset=knowledge_graph, blocking=True, partitions_def=source_partitions,
                description="Every edge carries the line it was read from, and every chunk it "
                "cites as evidence exists (frontmatter edges cite no chunk: it is not chunked).")
def every_edge_has_evidence(context: dg.AssetCheckExecutionContext,
                            tables: TablesResource) -> dg.AssetCheckResult:
    with tables.get_connection() as conn:
        missing = _judged_edges(conn, _SOURCE_EDGES, "no_text OR unknown_chunks > 0",
                                context.partition_key)
    return dg.AssetCheckResult(
        passed=not missing,
        metadata={"edges_without_evidence": len(missing),
                  "examples": markdown_table(missing, ["origin", "relation", "dst", "no_text",
                                                       "unknown_chunks"])})


@dg.asset_check(asset=knowledge_graph, partitions_def=source_partitions,
                description="Share of links that resolve to nothing or to several notes, per "
                "vault, stays under graph.max_broken_link_ratio (warning).")
def broken_link_ratio(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                      tables: TablesResource) -> dg.AssetCheckResult:
    source = context.partition_key
    with tables.get_connection() as conn:
        links, broken = conn.execute(
            "SELECT (SELECT count(*) FROM graph_edges WHERE source = $1 "
            "AND relation IN ('LINKS_TO', 'EMBEDS')), "
            # a code file's ambiguous names are code_edges_have_both_ends' to count
            "(SELECT count(*) FROM graph_broken_links WHERE source = $1 "
            "AND origin NOT LIKE 'file:%')", [source]).fetchone()
    return ratio_warning([{"source": source, "links": links, "broken": broken}], good="links",
                         bad="broken", limit=jarvis.load().graph.max_broken_link_ratio)


@dg.asset_check(asset=cross_source_links, blocking=True,
                description="Every cross-source edge ends at stored nodes, in DuckDB and the "
                "graph store, and cites existing chunks and a line.")
def cross_source_edges_valid(tables: TablesResource,
                             graph: GraphStoreResource) -> dg.AssetCheckResult:
    with tables.get_connection() as conn:
        invalid = _judged_edges(conn, _CROSS_EDGES, "dangling OR no_text OR unknown_chunks > 0",
                                CROSS_EXTRACTOR)
    with graph.open() as graph_store:
        in_store = graph_store.dangling_edges()
    return dg.AssetCheckResult(
        passed=not invalid and in_store == 0,
        metadata={"invalid_edges": len(invalid), "dangling_in_store": in_store,
                  "examples": markdown_table(invalid, ["origin", "relation", "dst", "dangling",
                                                       "no_text", "unknown_chunks"])})


@dg.asset_check(asset=cross_source_links,
                description="Tickets cited by key that no ticket set holds (or that several "
                "match), listed in unresolved_references (warning).")
def unresolved_ticket_references(tables: TablesResource) -> dg.AssetCheckResult:
    with tables.get_connection() as conn:
        rows = read_dicts(
            conn, "SELECT source, origin, written, reason, line FROM unresolved_references "
                  "WHERE list_contains(?, reason) ORDER BY source, origin, line",
            [list(WARN_REASONS)])
    return dg.AssetCheckResult(
        passed=not rows, severity=dg.AssetCheckSeverity.WARN,
        metadata={"unresolved": len(rows),
                  "examples": markdown_table(rows, ["source", "origin", "written", "reason",
                                                    "line"], limit=20)})
