"""Checks of the analytics layer: the newest snapshot matches the graph and its figures
agree with each other."""

import dagster as dg

from jarvis_assets.analytics import vault_analytics
from jarvis_assets.metadata import markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.analytics.consistency import latest_snapshot, snapshot_problems
from jarvis_core.analytics.history import graph_content_hash
from jarvis_resources import JarvisConfigResource, TablesResource


@dg.multi_asset_check(specs=[
    dg.AssetCheckSpec("snapshot_matches_graph", asset=vault_analytics, blocking=True,
                      partitions_def=source_partitions,
                      description="The newest snapshot was computed from the graph the "
                      "tables hold now (same content hash)."),
    dg.AssetCheckSpec("snapshot_figures_consistent", asset=vault_analytics, blocking=True,
                      partitions_def=source_partitions,
                      description="The newest snapshot's figures agree with each other and "
                      "with the notes: orphans and dead ends are notes and disjoint, every "
                      "linked note is in one community, link totals add up."),
])
def vault_analytics_checks(context: dg.AssetCheckExecutionContext,
                           jarvis: JarvisConfigResource, tables: TablesResource):
    """Both checks read the source's newest snapshot."""
    source = context.partition_key
    mismatched, problems = [], []
    with tables.get_connection() as conn:
        latest = latest_snapshot(conn, source)
        if latest is None:  # none is right only for a source being removed
            if source in jarvis.load().source_names:
                mismatched.append({"source": source, "snapshot": "(none)",
                                   "snapshot_hash": "", "graph_hash": ""})
        else:
            graph_hash = graph_content_hash(conn, source)
            if graph_hash != latest[1]:
                mismatched.append({"source": source, "snapshot": latest[0],
                                   "snapshot_hash": latest[1], "graph_hash": graph_hash})
            problems = [{"source": source, "problem": problem}
                        for problem in snapshot_problems(conn, source, latest[0])]
    yield dg.AssetCheckResult(
        check_name="snapshot_matches_graph", passed=not mismatched,
        metadata={"mismatched": markdown_table(mismatched, ["source", "snapshot",
                                                            "snapshot_hash", "graph_hash"])})
    yield dg.AssetCheckResult(
        check_name="snapshot_figures_consistent", passed=not problems,
        metadata={"problems": markdown_table(problems, ["source", "problem"], limit=50)})
