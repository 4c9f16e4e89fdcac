"""Raw layer for vaults: every note parsed into a row, every attachment listed."""

import dagster as dg

from jarvis_assets.metadata import (
    Stopwatch,
    counts_table,
    failures_table,
    log_failures,
    markdown_table,
)
from jarvis_assets.partitions import (
    other_kind_result,
    source_partitions,
    unreachable_source_result,
)
from jarvis_core.sources.vault.ingest import plan_ingest, read_stored, write_plan
from jarvis_core.sources.vault.scan import VaultScan, VaultUnavailable, scan_existing_vault
from jarvis_resources import JarvisConfigResource, TablesResource

DUCKDB_POOL = "jarvis_duckdb"


@dg.asset(
    partitions_def=source_partitions,
    group_name="sources",
    kinds={"duckdb", "markdown"},
    pool=DUCKDB_POOL,
)
def raw_notes(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
              tables: TablesResource) -> dg.MaterializeResult:
    """Notes of one vault (partition) with frontmatter, tags, links, embeds and headings.

    Only notes whose size, mtime and then content hash changed are re-read and re-parsed;
    deleted notes are removed; unreadable files are recorded in ``ingest_failures``.
    """
    source = context.partition_key
    config = jarvis.load()
    if (skipped := other_kind_result(config, source, "vault")) is not None:
        return skipped
    vault = config.vaults.get(source)
    watch = Stopwatch()
    try:
        scan = scan_existing_vault(vault.path, vault.exclude) if vault else VaultScan([], [])
    except VaultUnavailable as exc:
        return unreachable_source_result(context, tables, source, "vault", str(exc))
    watch.lap("scan")
    with tables.get_connection() as conn:
        stored = read_stored(conn, source)
    if vault is None and stored.notes.height:
        context.log.warning(f"source {source!r} is no longer configured: removing its notes")
    limits = config.ingest
    plan = plan_ingest(source, scan, stored, limits.max_note_bytes,
                       max_links=limits.max_links_per_note,
                       max_item_seconds=limits.max_item_seconds)
    watch.lap("parse")
    log_failures(context, source, plan.failures)
    with tables.get_connection() as conn:
        total, with_warnings = write_plan(conn, plan)
    watch.lap("write")
    counts = plan.counts()
    context.log.info(f"{source}: notes {counts}")
    return dg.MaterializeResult(metadata={
        **counts, **watch.seconds,
        "source_kind": "vault",
        "dagster/row_count": total,
        "attachments": len(plan.attachments),
        "notes_with_warnings": with_warnings,
        "vault_path": dg.MetadataValue.path(str(vault.path)) if vault else "(not configured)",
        "summary": counts_table(counts),
        "failures": failures_table(plan.failures),
        "preview": markdown_table(plan.note_rows, ["path", "title", "tags", "word_count"]),
    })
