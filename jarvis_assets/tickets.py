"""Raw layer for ticket sets: Jira and GitHub issue exports as normalised ticket rows."""

import dagster as dg

from jarvis_assets.metadata import (
    Stopwatch,
    counts_table,
    failures_table,
    log_failures,
    markdown_table,
)
from jarvis_assets.notes import DUCKDB_POOL
from jarvis_assets.partitions import (
    other_kind_result,
    source_partitions,
    unreachable_source_result,
)
from jarvis_core.sources.plan import utc_now
from jarvis_core.sources.tickets.export import TicketSet
from jarvis_core.sources.tickets.fields import TicketError
from jarvis_core.sources.tickets.ingest import (
    read_changed_export,
    read_stored,
    write_ticket_set,
)
from jarvis_resources import JarvisConfigResource, TablesResource

TICKETS_KIND = "tickets"


@dg.asset(
    partitions_def=source_partitions,
    group_name="sources",
    kinds={"duckdb", "json"},
    pool=DUCKDB_POOL,
)
def raw_tickets(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
                tables: TablesResource) -> dg.MaterializeResult:
    """Tickets of one ticket set (partition): Jira REST issues and search pages, GitHub
    issues and pull requests, each with its description, comments and links.

    An export whose files all hash as before is not parsed again; otherwise only changed
    files are parsed (a Jira file that hashes as before gives its stored tickets), and only
    tickets whose content hash changed are rewritten (the newest ``updated`` wins between
    copies of one key); removed tickets are deleted. Files and issues that cannot be read
    are recorded in ``ingest_failures`` and the rest goes on.
    """
    source = context.partition_key
    config = jarvis.load()
    if (skipped := other_kind_result(config, source, TICKETS_KIND)) is not None:
        return skipped
    settings, watch, now = config.tickets.get(source), Stopwatch(), utc_now()
    with tables.get_connection() as conn:
        stored = read_stored(conn, source)
    try:
        if settings is not None and stored.export_unchanged(settings):
            watch.lap("parse")
            return dg.MaterializeResult(metadata={
                "new": 0, "changed": 0, "unchanged": len(stored.hashes), "deleted": 0,
                "failed": len(stored.failed), "dagster/row_count": len(stored.hashes),
                "source_kind": TICKETS_KIND, "files": len(stored.file_rows),
                "files_changed": False, **watch.seconds})
        if settings is None and stored.hashes:
            context.log.warning(f"source {source!r} is not configured: removing its "
                                f"{len(stored.hashes)} tickets")
        with tables.get_connection() as conn:
            ticket_set = (read_changed_export(conn, source, settings, stored, config.ingest)
                          if settings else TicketSet())
    except TicketError as exc:  # the export vanished
        return unreachable_source_result(context, tables, source, TICKETS_KIND, str(exc))
    watch.lap("parse")
    with tables.get_connection() as conn:
        written = write_ticket_set(conn, source, ticket_set, settings, stored, now)
    watch.lap("write")
    log_failures(context, source, written.failures)
    counts = written.counts.as_dict()
    context.log.info(f"{source}: tickets {counts}")
    return dg.MaterializeResult(metadata={
        **counts, **watch.seconds, "source_kind": TICKETS_KIND,
        "dagster/row_count": sum(written.by_system.values()),
        "files": len(ticket_set.files), "files_changed": written.files_changed,
        "files_reused": ticket_set.reused_files,
        "tickets_by_system": counts_table(written.by_system),
        "export_path": dg.MetadataValue.path(str(settings.path)) if settings
        else "(not configured)",
        "summary": counts_table(counts),
        "failures": failures_table(written.failures),
        "preview": markdown_table(
            [{"key": r["key"], "summary": r["summary"], "status": r["status"],
              "updated": r["updated_at"]} for r in written.rows],
            ["key", "summary", "status", "updated"]),
    })
