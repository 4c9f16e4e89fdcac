"""Checks of a repository's code graph: every name-resolved edge joins two nodes of the right
types (that every symbol's file is at the head is checked on the code_symbols asset, from the
repository kind's descriptor). Other sources hold no code: their partitions pass."""

import dagster as dg

from jarvis_assets.graph import knowledge_graph
from jarvis_assets.metadata import markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.stores.tables import read_dicts
from jarvis_resources import TablesResource

# CALLS start at a symbol or, for a call at file level, at the file; every edge of these
# relations ends at a symbol.
_CODE_EDGES_WITHOUT_ENDS = """
    SELECT e.origin, e.relation, e.src, e.dst FROM graph_edges e
    WHERE e.source = $1 AND e.relation IN ('CALLS', 'EXTENDS', 'IMPLEMENTS')
      AND (NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.source = e.source
                       AND n.node_key = e.src
                       AND (n.type = 'symbol' OR (n.type = 'file' AND e.relation = 'CALLS')))
           OR NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.source = e.source
                          AND n.node_key = e.dst AND n.type = 'symbol'))
    ORDER BY e.origin, e.relation, e.src, e.dst
"""
_AMBIGUOUS_NAMES = """
    SELECT count(*) FROM graph_broken_links
    WHERE source = $1 AND origin LIKE 'file:%' AND reason = 'ambiguous'
"""


def code_edges_without_ends(conn, source: str) -> list[dict]:
    """The CALLS, EXTENDS and IMPLEMENTS edges of ``source`` missing an end."""
    return read_dicts(conn, _CODE_EDGES_WITHOUT_ENDS, [source])


@dg.asset_check(asset=knowledge_graph, blocking=True, partitions_def=source_partitions,
                description="Every CALLS, EXTENDS and IMPLEMENTS edge of a repository joins "
                "stored nodes: a symbol (or the calling file) to a symbol. Names that match "
                "several symbols are broken links, never edges (counted here).")
def code_edges_have_both_ends(context: dg.AssetCheckExecutionContext,
                              tables: TablesResource) -> dg.AssetCheckResult:
    with tables.get_connection() as conn:
        missing = code_edges_without_ends(conn, context.partition_key)
        (ambiguous,) = conn.execute(_AMBIGUOUS_NAMES, [context.partition_key]).fetchone()
    return dg.AssetCheckResult(
        passed=not missing,
        metadata={"edges_without_an_end": len(missing), "ambiguous_names": ambiguous,
                  "examples": markdown_table(missing, ["origin", "relation", "src", "dst"])})
