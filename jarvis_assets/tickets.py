"""Raw layer for ticket sets: Jira and GitHub issue exports as normalised ticket rows."""

import time
from collections import defaultdict
from datetime import UTC, datetime

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.notes import DUCKDB_POOL
from jarvis_assets.partitions import (
    other_kind_result,
    source_partitions,
    unreachable_source_result,
)
from jarvis_core.config import TicketsConfig
from jarvis_core.sources.tickets.export import TicketSet, export_file_hashes, read_ticket_set
from jarvis_core.sources.tickets.fields import JIRA, PARSER_VERSION, TicketError
from jarvis_core.stores import tables
from jarvis_resources import JarvisConfigResource

TICKETS_KIND = "tickets"
_SETTINGS = ""  # the ticket_files row that records what else shapes the tickets


def _settings_id(settings: TicketsConfig) -> str:
    return (f"parser v{PARSER_VERSION}, format {settings.format}, "
            f"repo {settings.repo or '(from the export)'}")


def _reusable(stored: list[dict], files: list[dict], failed: list[str]
              ) -> dict[str, tuple[str, list[dict]]]:
    """Export files whose stored tickets can stand in for parsing them again (converting
    Jira markup is the slow part): Jira files without failures whose every key is still
    stored from them. GitHub files are always parsed: cheap, and a comments file changes
    issues of other files."""
    by_path: dict[str, list[dict]] = defaultdict(list)
    for ticket in stored:
        by_path[ticket["path"]].append(ticket)
    return {
        row["path"]: (row["file_hash"], by_path[row["path"]]) for row in files
        if row["keys"] and sorted(row["keys"]) == sorted(t["key"] for t in by_path[row["path"]])
        and all(t["system"] == JIRA for t in by_path[row["path"]])
        and not any(f == row["path"] or f.startswith(row["path"] + "#") for f in failed)}


def _changes(ticket_set: TicketSet, stored: dict[str, str]) -> dict[str, list[str]]:
    """Keys by what happened to them since the stored rows (content hash decides)."""
    current = {key: ticket["content_hash"] for key, ticket in ticket_set.tickets.items()}
    return {
        "new": sorted(set(current) - set(stored)),
        "changed": sorted(k for k in set(current) & set(stored) if current[k] != stored[k]),
        "unchanged": sorted(k for k in set(current) & set(stored) if current[k] == stored[k]),
        "deleted": sorted(set(stored) - set(current)),
    }


@dg.asset(
    partitions_def=source_partitions,
    group_name="sources",
    kinds={"duckdb", "json"},
    pool=DUCKDB_POOL,
)
def raw_tickets(
    context: dg.AssetExecutionContext, jarvis: JarvisConfigResource, duckdb: DuckDBResource
) -> dg.MaterializeResult:
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
    settings = config.tickets.get(source)
    started = time.perf_counter()
    now = datetime.now(UTC).replace(tzinfo=None)

    with duckdb.get_connection() as conn:
        tables.ensure_schema(conn)
        stored = dict(conn.execute(
            "SELECT key, content_hash FROM tickets WHERE source = ?", [source]).fetchall())
        file_rows = tables.read_frame(
            conn, "SELECT path, file_hash, keys FROM ticket_files WHERE source = ?",
            [source]).to_dicts()
        failed_before = [path for (path,) in conn.execute(
            "SELECT path FROM ingest_failures WHERE source = ?", [source]).fetchall()]
    stored_files = {row["path"]: row["file_hash"] for row in file_rows}

    try:
        if settings is None:
            if stored:
                context.log.warning(f"source {source!r} is not configured: removing its "
                                    f"{len(stored)} tickets")
            ticket_set = TicketSet()
        elif stored_files and {**export_file_hashes(settings.path),
                               _SETTINGS: _settings_id(settings)} == stored_files:
            return dg.MaterializeResult(metadata={  # nothing in the export changed
                "new": 0, "changed": 0, "unchanged": len(stored), "deleted": 0,
                "failed": len(failed_before),
                "dagster/row_count": len(stored), "source_kind": TICKETS_KIND,
                "files": len(stored_files), "files_changed": False,
                "parse_seconds": round(time.perf_counter() - started, 3)})
        else:
            reuse = {}
            if stored_files.get(_SETTINGS) == _settings_id(settings):
                with duckdb.get_connection() as conn:
                    reuse = _reusable(tables.read_frame(
                        conn, "SELECT * FROM tickets WHERE source = ?", [source]).to_dicts(),
                        file_rows, failed_before)
            ticket_set = read_ticket_set(settings.path, source, repo=settings.repo,
                                         expected=settings.format, reuse=reuse)
    except TicketError as exc:  # the export vanished
        return unreachable_source_result(context, duckdb, source, TICKETS_KIND, str(exc),
                                         "SELECT count(*) FROM tickets WHERE source = ?")
    parsed = time.perf_counter()

    changes = _changes(ticket_set, stored)
    rewrite = changes["new"] + changes["changed"]
    failures = [{"source": source, "path": location, "reason": reason, "size_bytes": None,
                 "mtime_ns": None, "detected_at": now}
                for location, reason in ticket_set.failures]
    for failure in failures:
        context.log.warning(f"{source}/{failure['path']}: not ingested: {failure['reason']}")
    rows = [{**ticket_set.tickets[key], "file_hash": ticket_set.files.get(
        ticket_set.tickets[key]["path"]), "ingested_at": now} for key in rewrite]
    files = {**ticket_set.files, _SETTINGS: _settings_id(settings)} if settings else {}
    files_changed = files != stored_files
    with duckdb.get_connection() as conn:
        tables.replace_rows(conn, "tickets", source=source,
                           remove_paths=rewrite + changes["deleted"],
                           rows=tables.frame("tickets", rows), key_column="key")
        if files_changed:
            tables.replace_rows(conn, "ticket_files", source=source, remove_paths=None,
                               rows=tables.frame("ticket_files", [
                                   {"source": source, "path": path, "file_hash": digest,
                                    "keys": ticket_set.file_keys.get(path, [])}
                                   for path, digest in sorted(files.items())]))
        tables.replace_rows(conn, "ingest_failures", source=source, remove_paths=None,
                           rows=tables.frame("ingest_failures", failures))
        by_system = dict(conn.execute(
            "SELECT system, count(*) FROM tickets WHERE source = ? GROUP BY system",
            [source]).fetchall())
        total = sum(by_system.values())

    counts = {name: len(keys) for name, keys in changes.items()} | {"failed": len(failures)}
    context.log.info(f"{source}: tickets {counts}")
    return dg.MaterializeResult(metadata={
        **counts,
        "dagster/row_count": total,
        "source_kind": TICKETS_KIND,
        "files": len(ticket_set.files),
        "files_changed": files_changed,
        "files_reused": ticket_set.reused_files,
        "tickets_by_system": counts_table(by_system),
        "export_path": dg.MetadataValue.path(str(settings.path)) if settings
        else "(not configured)",
        "parse_seconds": round(parsed - started, 3),
        "write_seconds": round(time.perf_counter() - parsed, 3),
        "summary": counts_table(counts),
        "failures": markdown_table(failures, ["path", "reason"], limit=50),
        "preview": markdown_table(
            [{"key": r["key"], "summary": r["summary"], "status": r["status"],
              "updated": r["updated_at"]} for r in rows], ["key", "summary", "status", "updated"]),
    })

