"""Checks of the raw layer: each source could be read, and few of its items failed."""

import dagster as dg

from jarvis_assets.mail import raw_mail
from jarvis_assets.metadata import markdown_table
from jarvis_assets.notes import raw_notes
from jarvis_assets.pages import raw_pages
from jarvis_assets.partitions import source_partitions
from jarvis_assets.repos import raw_repository
from jarvis_assets.tickets import raw_tickets
from jarvis_core.sources.plan import WHOLE_SOURCE
from jarvis_resources import JarvisConfigResource, TablesResource


def ratio_warning(rows: list[dict], *, good: str, bad: str, limit: float) -> dg.AssetCheckResult:
    """Warns when, in some source, bad / (good + bad) exceeds ``limit``."""
    for row in rows:
        total = row[good] + row[bad]
        row["ratio"] = round(row[bad] / total, 4) if total else 0.0
    worst = max((row["ratio"] for row in rows), default=0.0)
    return dg.AssetCheckResult(
        passed=worst <= limit, severity=dg.AssetCheckSeverity.WARN,
        metadata={"worst_ratio": worst, "limit": limit,
                  "per_source": markdown_table(rows, ["source", good, bad, "ratio"])})


def _source_reachable(asset: dg.AssetsDefinition, kind: str) -> dg.AssetChecksDefinition:
    """Whether the run's source, if of ``kind``, could be read at all (its folder, clone or
    export exists). A warning: what was stored before stays and is published, so the other
    sources' news are not held back by an unmounted drive."""

    @dg.asset_check(asset=asset, name="source_reachable", partitions_def=source_partitions,
                    description=f"The {kind} source could be read at all (an unmounted "
                                "folder or a vanished clone or export fails this; its data "
                                "stays as stored).")
    def source_reachable(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                         tables: TablesResource) -> dg.AssetCheckResult:
        source = context.partition_key
        rows = []
        if jarvis.load().source_kind(source) == kind:
            with tables.get_connection() as conn:
                rows = [{"source": source, "reason": reason} for (reason,) in conn.execute(
                    "SELECT reason FROM ingest_failures WHERE path = ? AND source = ?",
                    [WHOLE_SOURCE, source]).fetchall()]
        return dg.AssetCheckResult(
            passed=not rows, severity=dg.AssetCheckSeverity.WARN,
            metadata={"unreachable": len(rows),
                      "sources": markdown_table(rows, ["source", "reason"])})

    return source_reachable


def _failed_ratio(asset: dg.AssetsDefinition, name: str, kind: str, table: str,
                  what: str) -> dg.AssetChecksDefinition:
    """A warning when, in the run's source of ``kind``, the share of items that could not
    be read (``ingest_failures``) among them and the rows of ``table`` exceeds
    ingest.max_failed_ratio."""

    @dg.asset_check(asset=asset, name=name, partitions_def=source_partitions,
                    description=f"Share of {what} that could not be read, per {kind} source, "
                                "stays under ingest.max_failed_ratio (warning).")
    def failed_ratio(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                     tables: TablesResource) -> dg.AssetCheckResult:
        config, source = jarvis.load(), context.partition_key
        rows = []
        if config.source_kind(source) == kind:
            with tables.get_connection() as conn:
                good, bad = conn.execute(
                    f"SELECT (SELECT count(*) FROM {table} WHERE source = $1), "
                    "(SELECT count(*) FROM ingest_failures WHERE source = $1)",
                    [source]).fetchone()
            rows = [{"source": source, table: good, "failed": bad}]
        return ratio_warning(rows, good=table, bad="failed",
                             limit=config.ingest.max_failed_ratio)

    return failed_ratio


failed_file_ratio = _failed_ratio(raw_notes, "failed_file_ratio", "vault", "notes", "files")
failed_ticket_ratio = _failed_ratio(raw_tickets, "failed_ticket_ratio", "tickets", "tickets",
                                    "export files and issues")
vault_reachable = _source_reachable(raw_notes, "vault")
repository_reachable = _source_reachable(raw_repository, "repo")
ticket_export_reachable = _source_reachable(raw_tickets, "tickets")
failed_message_ratio = _failed_ratio(raw_mail, "failed_message_ratio", "mail", "mail_messages",
                                     "mail files and messages")
failed_page_ratio = _failed_ratio(raw_pages, "failed_page_ratio", "confluence", "pages",
                                  "export files and pages")
mail_reachable = _source_reachable(raw_mail, "mail")
confluence_export_reachable = _source_reachable(raw_pages, "confluence")
