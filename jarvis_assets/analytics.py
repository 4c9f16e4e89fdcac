"""Analytics layer: time-stamped snapshots of each source's structure, kept as history."""

import json
import time
from datetime import UTC, datetime

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_assets.checks import _sources_in_scope
from jarvis_assets.graph import knowledge_graph
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.notes import DUCKDB_POOL
from jarvis_assets.partitions import source_partitions
from jarvis_core.analytics.charts import png_markdown, render_charts
from jarvis_core.analytics.figures import LIST_LIMIT, QUALITY_FORMULA, compute_snapshot
from jarvis_core.analytics.history import (
    graph_content_hash,
    history,
    record_snapshot,
    remove_history,
)
from jarvis_core.stores import tables
from jarvis_resources import JarvisConfigResource

_CHART_TITLES = {"community_sizes": "Community sizes", "degree_distribution":
                 "Degree distribution", "trend": "Trend over snapshots"}


@dg.asset(
    partitions_def=source_partitions,
    deps=[knowledge_graph],
    group_name="analytics",
    kinds={"duckdb", "python"},
    pool=DUCKDB_POOL,
)
def vault_analytics(
    context: dg.AssetExecutionContext, jarvis: JarvisConfigResource, duckdb: DuckDBResource
) -> dg.MaterializeResult:
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
        with duckdb.get_connection() as conn:
            tables.ensure_schema(conn)
            removed = remove_history(conn, source)
        return dg.MaterializeResult(metadata={"snapshots_removed": removed,
                                              "dagster/row_count": 0})
    now = datetime.now(UTC).replace(tzinfo=None)
    with duckdb.get_connection() as conn:
        tables.ensure_schema(conn)
        snapshot = compute_snapshot(conn, source, settings, now)
        dropped = record_snapshot(conn, snapshot, settings.keep_snapshots)
        trend = history(conn, source)
    started = time.perf_counter()
    chart_dir = config.data_dir / "analytics" / source
    try:  # the snapshot is recorded: a chart that cannot be drawn only costs the picture
        charts = render_charts(snapshot, trend)
        chart_dir.mkdir(parents=True, exist_ok=True)
        for name, png in charts.items():
            (chart_dir / f"{name}.png").write_bytes(png)
        chart_error = None
    except (OSError, ValueError, RuntimeError) as exc:
        charts, chart_error = {}, f"{type(exc).__name__}: {exc}"
        context.log.warning(f"{source}: charts not drawn: {chart_error}")
    chart_seconds = time.perf_counter() - started

    figures, totals = snapshot.figures, snapshot.figures["totals"]
    context.log.info(f"{source}: analytics snapshot {snapshot.snapshot_id} {totals}")
    return dg.MaterializeResult(metadata={
        **totals,   # numbers: the UI plots them across materializations
        "dagster/row_count": totals["notes"],
        "snapshot_id": snapshot.snapshot_id,
        "content_hash": snapshot.content_hash,
        "snapshots_kept": len(trend), "snapshots_dropped": dropped,
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
        **{f"chart_{name}": dg.MetadataValue.md(png_markdown(_CHART_TITLES[name], png))
           for name, png in charts.items()},
        "charts_dir": dg.MetadataValue.path(str(chart_dir)),
        **({"chart_error": chart_error} if chart_error else {}),
        "compute_seconds": snapshot.compute_seconds,
        "chart_seconds": round(chart_seconds, 3),
    })


def _paths_table(paths: list[str]) -> dg.MetadataValue:
    return markdown_table([{"path": path} for path in paths], ["path"], limit=20)


@dg.multi_asset_check(specs=[
    dg.AssetCheckSpec("snapshot_matches_graph", asset=vault_analytics, blocking=True,
                      description="The newest snapshot was computed from the graph the "
                      "tables hold now (same content hash)."),
    dg.AssetCheckSpec("snapshot_figures_consistent", asset=vault_analytics, blocking=True,
                      description="The newest snapshot's figures agree with each other and "
                      "with the notes: orphans and dead ends are notes and disjoint, every "
                      "linked note is in one community, link totals add up."),
])
def vault_analytics_checks(context: dg.AssetCheckExecutionContext,
                           jarvis: JarvisConfigResource, duckdb: DuckDBResource):
    """Both checks read the newest snapshot of each source in scope."""
    mismatched, problems = [], []
    configured = set(jarvis.load().source_names)
    with duckdb.get_connection() as conn:
        for source in _sources_in_scope(context, jarvis):
            latest = conn.execute(
                "SELECT snapshot_id, content_hash FROM analytics_snapshots WHERE source = ? "
                "ORDER BY generated_at DESC, snapshot_id DESC LIMIT 1", [source]).fetchone()
            if latest is None:  # none is right only for a source being removed
                if source in configured:
                    mismatched.append({"source": source, "snapshot": "(none)",
                                       "snapshot_hash": "", "graph_hash": ""})
                continue
            graph_hash = graph_content_hash(conn, source)
            if graph_hash != latest[1]:
                mismatched.append({"source": source, "snapshot": latest[0],
                                   "snapshot_hash": latest[1], "graph_hash": graph_hash})
            problems += [{"source": source, "problem": problem}
                         for problem in _inconsistencies(conn, source, latest[0])]
    yield dg.AssetCheckResult(
        check_name="snapshot_matches_graph", passed=not mismatched,
        metadata={"mismatched": markdown_table(mismatched, ["source", "snapshot",
                                                            "snapshot_hash", "graph_hash"])})
    yield dg.AssetCheckResult(
        check_name="snapshot_figures_consistent", passed=not problems,
        metadata={"problems": markdown_table(problems, ["source", "problem"], limit=50)})


def _inconsistencies(conn, source: str, snapshot_id: str) -> list[str]:
    """Names of the consistency rules the snapshot breaks (lists cut at LIST_LIMIT are
    compared only when complete)."""
    figures = json.loads(conn.execute(
        "SELECT figures FROM analytics_snapshots WHERE source = ? AND snapshot_id = ?",
        [source, snapshot_id]).fetchone()[0])
    totals = figures["totals"]
    rows = tables.read_frame(conn, "SELECT * FROM analytics_notes WHERE source = ? AND "
                                  "snapshot_id = ?", [source, snapshot_id]).to_dicts()
    notes = {path for (path,) in conn.execute(
        "SELECT path FROM notes WHERE source = ?", [source]).fetchall()}
    orphans, dead_ends = set(figures["orphans"]), set(figures["dead_ends"])
    complete = {name: len(figures[name]) < LIST_LIMIT
                for name in ("communities", "folders")}
    in_communities = sum(c["size"] for c in figures["communities"])
    found = {
        "orphans are not all notes": not orphans <= notes,
        "dead ends are not all notes": not dead_ends <= notes,
        "a note is both an orphan and a dead end": bool(orphans & dead_ends),
        "per-note rows differ from the notes": {r["path"] for r in rows} != notes
        or totals["notes"] != len(notes),
        "orphan count differs from the per-note rows":
            totals["orphans"] != sum(r["orphan"] for r in rows),
        "links out and links in do not both add up to the link total":
            not totals["links"] == sum(r["links_out"] for r in rows)
            == sum(r["links_in"] for r in rows),
        "linked notes and community members differ":
            complete["communities"] and in_communities != totals["notes"] - totals["orphans"]
            or any((r["community"] >= 0) == r["orphan"] for r in rows),
        "folder note counts do not add up": complete["folders"]
            and sum(f["notes"] for f in figures["folders"]) != totals["notes"],
        "broken link count differs from the graph": totals["broken_links"] != conn.execute(
            "SELECT count(*) FROM graph_broken_links WHERE source = ?", [source]).fetchone()[0],
    }
    return [problem for problem, failed in found.items() if failed]


analytics_checks = [vault_analytics_checks]
