"""Raw layer for vaults: every note parsed into a row, every attachment listed."""

import time

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.partitions import (
    other_kind_result,
    source_partitions,
    unreachable_source_result,
)
from jarvis_core.sources.vault_plan import note_frame, plan_ingest
from jarvis_core.sources.vault_scan import VaultScan, VaultUnavailable, scan_existing_vault
from jarvis_core.stores import tables
from jarvis_resources import JarvisConfigResource

DUCKDB_POOL = "jarvis_duckdb"


@dg.asset(
    partitions_def=source_partitions,
    group_name="sources",
    kinds={"duckdb", "markdown"},
    pool=DUCKDB_POOL,
)
def raw_notes(
    context: dg.AssetExecutionContext, jarvis: JarvisConfigResource, duckdb: DuckDBResource
) -> dg.MaterializeResult:
    """Notes of one vault (partition) with frontmatter, tags, links, embeds and headings.

    Only notes whose size, mtime and then content hash changed are re-read and re-parsed;
    deleted notes are removed; unreadable files are recorded in ``ingest_failures``.
    """
    source = context.partition_key
    config = jarvis.load()
    if (skipped := other_kind_result(config, source, "vault")) is not None:
        return skipped
    vault = config.vaults.get(source)
    started = time.perf_counter()
    try:
        scan = scan_existing_vault(vault.path, vault.exclude) if vault else \
            VaultScan(files=[], problems=[])
    except VaultUnavailable as exc:
        return unreachable_source_result(context, duckdb, source, "vault", str(exc),
                                         "SELECT count(*) FROM notes WHERE source = ?")
    scanned = time.perf_counter()

    with duckdb.get_connection() as conn:
        tables.ensure_schema(conn)
        existing = tables.read_frame(
            conn, "SELECT path, size_bytes, mtime_ns, content_hash, parser_version "
                  "FROM notes WHERE source = ?", [source])
        failures_before = tables.read_frame(
            conn, "SELECT path, size_bytes, mtime_ns, reason FROM ingest_failures "
                  "WHERE source = ?", [source])
    if vault is None and existing.height:
        context.log.warning(f"source {source!r} is no longer configured: removing its notes")

    plan = plan_ingest(source, scan, existing, failures_before, config.ingest.max_note_bytes)
    parsed = time.perf_counter()
    for failure in plan.failures:
        context.log.warning(f"{source}/{failure['path']}: not ingested: {failure['reason']}")

    with duckdb.get_connection() as conn:
        tables.replace_rows(conn, "notes", source=source, remove_paths=plan.removed_paths,
                           rows=note_frame(plan))
        if plan.touched:
            conn.executemany("UPDATE notes SET size_bytes = ?, mtime_ns = ? "
                             "WHERE source = ? AND path = ?",
                             [(size, mtime, source, path) for size, mtime, path in plan.touched])
        tables.replace_rows(conn, "ingest_failures", source=source, remove_paths=None,
                           rows=tables.frame("ingest_failures", plan.failures))
        tables.replace_rows(conn, "attachments", source=source, remove_paths=None,
                           rows=tables.frame("attachments", plan.attachments))
        total, with_warnings = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE len(warnings) > 0) FROM notes "
            "WHERE source = ?", [source]).fetchone()

    counts = plan.counts()
    context.log.info(f"{source}: notes {counts}")
    return dg.MaterializeResult(metadata={
        **counts,
        "source_kind": "vault",
        "dagster/row_count": total,
        "attachments": len(plan.attachments),
        "notes_with_warnings": with_warnings,
        "vault_path": dg.MetadataValue.path(str(vault.path)) if vault else "(not configured)",
        "scan_seconds": round(scanned - started, 3),
        "parse_seconds": round(parsed - scanned, 3),
        "write_seconds": round(time.perf_counter() - parsed, 3),
        "summary": counts_table(counts),
        "failures": markdown_table(plan.failures, ["path", "reason"], limit=50),
        "preview": markdown_table(plan.note_rows, ["path", "title", "tags", "word_count"]),
    })
