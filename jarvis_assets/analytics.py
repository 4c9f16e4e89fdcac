"""Analytics layer: a time-stamped snapshot of each source's notes and graph, for the UI,
the vault context the assistants read, and trends."""

import dagster as dg

from jarvis_assets.automation import follows_upstream
from jarvis_assets.graph import knowledge_graph
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.analytics.backup import back_up_history, backup_dir
from jarvis_core.analytics.charts import draw_charts, image_markdown
from jarvis_core.analytics.figures import QUALITY_FORMULA, compute_snapshot
from jarvis_core.analytics.history import (
    AnalyticsSnapshot,
    history,
    record_snapshot,
    remove_history,
)
from jarvis_core.progress import Stopwatch
from jarvis_core.sources.plan import utc_now
from jarvis_resources import JarvisConfigResource, TablesResource

_CHART_TITLES = {"community_sizes": "Community sizes", "degree_distribution":
                 "Degree distribution", "trend": "Trend over snapshots"}


def _paths_table(paths: list[str]) -> dg.MetadataValue:
    return markdown_table([{"path": path} for path in paths], ["path"], limit=20)


def _figure_tables(snapshot: AnalyticsSnapshot, trend: list[dict]) -> dict:
    """The snapshot's lists as markdown tables for the UI."""
    figures = snapshot.figures
    return {
        "top_hubs": markdown_table(figures["hubs"], ["path", "degree", "links_in",
                                                     "links_out", "pagerank"]),
        "community_list": markdown_table(
            [{**c, "top_notes": [p.rsplit("/", 1)[-1] for p in c["top_notes"]],
              "top_tags": [t["tag"] for t in c["top_tags"]]} for c in figures["communities"]],
            ["id", "size", "label", "top_notes", "top_tags"], limit=20),
        "orphan_list": _paths_table(figures["orphans"]),
        "dead_end_list": _paths_table(figures["dead_ends"]),
        "broken_link_list": markdown_table(
            [{**b, "sources": [f"{s['path']}:{s['line']}" for s in b["sources"]]}
             for b in figures["broken_links"]], ["target", "reason", "count", "sources"],
            limit=20),
        "stale_note_list": markdown_table(figures["stale_notes"],
                                          ["path", "days_untouched", "links_in"]),
        "tag_counts": counts_table({t["tag"]: t["notes"] for t in figures["tags"][:20]}),
        "folder_figures": markdown_table(
            figures["folders"], ["folder", "notes", "words", "links_out", "links_in", "orphans",
                                 "broken_links", "mean_quality"], limit=30),
        "lowest_quality": markdown_table(figures["quality"]["lowest"], ["path", "quality"]),
        "quality_formula": dg.MetadataValue.md(QUALITY_FORMULA),
        "cross_source": dg.MetadataValue.json(figures["cross_source"]),
        "trend": markdown_table(
            [{**p, "generated_at": f"{p['generated_at']:%Y-%m-%d %H:%M}"} for p in trend[::-1]],
            ["generated_at", "notes", "links", "orphans", "dead_ends", "broken_links",
             "stale_notes", "communities"]),
    }


@dg.asset(
    partitions_def=source_partitions,
    deps=[knowledge_graph],
    group_name="analytics",
    kinds={"duckdb", "python"},
    automation_condition=follows_upstream,  # a sensor's ingestion leaves no stale snapshot
)
def vault_analytics(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
                    tables: TablesResource) -> dg.MaterializeResult:
    """A time-stamped snapshot of one source's notes and graph: orphans, dead ends, broken
    links, hubs, Leiden communities, tags, stale notes, folders and note quality.

    Snapshots are appended to ``analytics_snapshots`` (history, ``analytics.keep_snapshots``
    per source) with the content hash of the graph they were computed from, so the query
    side can tell whether the published graph has moved on since.
    """
    source = context.partition_key
    config = jarvis.load()
    settings = config.analytics
    if source not in config.source_names:
        context.log.warning(f"source {source!r} is not configured: removing its snapshots")
        with tables.get_connection() as conn:
            removed = remove_history(conn, source)
            back_up_history(conn, backup_dir(config.data_dir))
        return dg.MaterializeResult(metadata={"snapshots_removed": removed,
                                              "dagster/row_count": 0})
    with tables.get_connection() as conn:
        snapshot = compute_snapshot(conn, source, settings, utc_now())
        dropped = record_snapshot(conn, snapshot, settings.keep_snapshots)
        back_up_history(conn, backup_dir(config.data_dir))  # survives a rebuilt tables file
        trend = history(conn, source)
    watch = Stopwatch()
    chart_dir = config.data_dir / "analytics" / source
    charts, chart_error = draw_charts(snapshot, trend, chart_dir)
    if chart_error:
        context.log.warning(f"{source}: charts not drawn: {chart_error}")
    watch.lap("chart")
    totals = snapshot.figures["totals"]
    context.log.info(f"{source}: analytics snapshot {snapshot.snapshot_id} {totals}")
    return dg.MaterializeResult(metadata={
        **totals,   # numbers: the UI plots them across materializations
        "dagster/row_count": totals["notes"],
        "snapshot_id": snapshot.snapshot_id,
        "content_hash": snapshot.content_hash,
        "snapshots_kept": len(trend), "snapshots_dropped": dropped,
        **_figure_tables(snapshot, trend),
        **{f"chart_{name}": dg.MetadataValue.md(image_markdown(_CHART_TITLES[name], svg))
           for name, svg in charts.items()},
        "charts_dir": dg.MetadataValue.path(str(chart_dir)),
        **({"chart_error": chart_error} if chart_error else {}),
        "compute_seconds": snapshot.compute_seconds, **watch.seconds,
    })
