"""A ticket set's rows in the tables: what earlier runs stored, which export files can be
reused instead of parsed, what changed per key, and writing it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import duckdb

from jarvis_core.progress import Stopwatch
from jarvis_core.settings import IngestSettings
from jarvis_core.sources.kind import Ingested, IngestRun, SourceUnreachable
from jarvis_core.sources.plan import ItemCounts, failure_row
from jarvis_core.sources.tickets.export import TicketSet, export_file_hashes, read_ticket_set
from jarvis_core.sources.tickets.fields import JIRA, PARSER_VERSION, TicketError
from jarvis_core.sources.tickets.settings import TicketsConfig
from jarvis_core.sources.tickets.tables import TICKET_FILES, TICKETS
from jarvis_core.stores import tables

_SETTINGS = ""  # the ticket_files row that records what else shapes the tickets


def settings_id(settings: TicketsConfig) -> str:
    return (f"parser v{PARSER_VERSION}, format {settings.format}, "
            f"repo {settings.repo or '(from the export)'}")


@dataclass(frozen=True)
class StoredTickets:
    """What earlier runs stored: content hash per key, the export files with their hashes and
    keys, and the items that failed."""

    hashes: dict[str, str]
    file_rows: list[dict]
    failed: list[str]

    @property
    def files(self) -> dict[str, str]:
        return {row["path"]: row["file_hash"] for row in self.file_rows}

    def export_unchanged(self, settings: TicketsConfig) -> bool:
        """Every export file hashes as stored and nothing else that shapes tickets moved."""
        return bool(self.file_rows) and self.files == {
            **export_file_hashes(settings.path), _SETTINGS: settings_id(settings)}


def read_stored(conn: duckdb.DuckDBPyConnection, source: str) -> StoredTickets:
    return StoredTickets(
        dict(conn.execute("SELECT key, content_hash FROM tickets WHERE source = ?",
                          [source]).fetchall()),
        tables.read_frame(conn, "SELECT path, file_hash, keys FROM ticket_files "
                                "WHERE source = ?", [source]).to_dicts(),
        [path for (path,) in conn.execute("SELECT path FROM ingest_failures WHERE source = ?",
                                          [source]).fetchall()])


def reusable(stored_rows: list[dict], stored: StoredTickets
             ) -> dict[str, tuple[str, list[dict]]]:
    """Export files whose stored tickets can stand in for parsing them again (converting
    Jira markup is the slow part): Jira files without failures whose every key is still
    stored from them. GitHub files are always parsed: cheap, and a comments file changes
    issues of other files."""
    by_path: dict[str, list[dict]] = defaultdict(list)
    for ticket in stored_rows:
        by_path[ticket["path"]].append(ticket)
    return {
        row["path"]: (row["file_hash"], by_path[row["path"]]) for row in stored.file_rows
        if row["keys"] and sorted(row["keys"]) == sorted(t["key"] for t in by_path[row["path"]])
        and all(t["system"] == JIRA for t in by_path[row["path"]])
        and not any(f == row["path"] or f.startswith(row["path"] + "#")
                    for f in stored.failed)}


def read_changed_export(conn: duckdb.DuckDBPyConnection, source: str,
                        settings: TicketsConfig, stored: StoredTickets,
                        limits: IngestSettings | None = None) -> TicketSet:
    """Parse the export, reusing the stored tickets of files that hash as before."""
    reuse = {}
    if stored.files.get(_SETTINGS) == settings_id(settings):
        reuse = reusable(tables.read_frame(conn, "SELECT * FROM tickets WHERE source = ?",
                                           [source]).to_dicts(), stored)
    return read_ticket_set(settings.path, source, repo=settings.repo,
                           expected=settings.format, reuse=reuse,
                           limits=limits or IngestSettings())


def key_changes(ticket_set: TicketSet, stored: dict[str, str]) -> dict[str, list[str]]:
    """Keys by what happened to them since the stored rows (content hash decides)."""
    current = {key: ticket["content_hash"] for key, ticket in ticket_set.tickets.items()}
    return {
        "new": sorted(set(current) - set(stored)),
        "changed": sorted(k for k in set(current) & set(stored) if current[k] != stored[k]),
        "unchanged": sorted(k for k in set(current) & set(stored) if current[k] == stored[k]),
        "deleted": sorted(set(stored) - set(current)),
    }


@dataclass(frozen=True)
class TicketWrite:
    """What writing a ticket set did."""

    counts: ItemCounts
    rows: list[dict]           # the tickets written (new and changed)
    failures: list[dict]
    files_changed: bool
    by_system: dict[str, int]  # tickets stored afterwards, by system


def write_ticket_set(conn: duckdb.DuckDBPyConnection, source: str, ticket_set: TicketSet,
                     settings: TicketsConfig | None, stored: StoredTickets,
                     now: datetime) -> TicketWrite:
    """Rewrite only the tickets whose content hash changed, remove those gone, record the
    export files' hashes and keys and the per-item failures."""
    changes = key_changes(ticket_set, stored.hashes)
    rewrite = changes["new"] + changes["changed"]
    failures = [failure_row(source, location, reason, detected_at=now)
                for location, reason in ticket_set.failures]
    rows = [{**ticket_set.tickets[key], "ingested_at": now,
             "file_hash": ticket_set.files.get(ticket_set.tickets[key]["path"])}
            for key in rewrite]
    files = {**ticket_set.files, _SETTINGS: settings_id(settings)} if settings else {}
    files_changed = files != stored.files
    tables.replace_rows(conn, TICKETS, source=source, remove_paths=rewrite + changes["deleted"],
                        rows=rows, key_column="key")
    if files_changed:
        tables.replace_rows(conn, TICKET_FILES, source=source, remove_paths=None,
                            rows=[{"source": source, "path": path, "file_hash": digest,
                                   "keys": ticket_set.file_keys.get(path, [])}
                                  for path, digest in sorted(files.items())])
    tables.replace_rows(conn, tables.INGEST_FAILURES, source=source, remove_paths=None,
                        rows=failures)
    by_system = dict(conn.execute("SELECT system, count(*) FROM tickets WHERE source = ? "
                                  "GROUP BY system", [source]).fetchall())
    counts = ItemCounts(*(len(changes[name]) for name in ("new", "changed", "unchanged",
                                                           "deleted")), failed=len(failures))
    return TicketWrite(counts, rows, failures, files_changed, by_system)


def ingest(run: IngestRun) -> Ingested:
    """The ticket set's changed export files parsed and its changed tickets rewritten; an
    export whose files all hash as before is not parsed at all."""
    source, settings, watch = run.source, run.settings, Stopwatch()
    with run.connect() as conn:
        stored = read_stored(conn, source)
    location = str(settings.path) if settings else None
    try:
        if settings is not None and stored.export_unchanged(settings):
            watch.lap("parse")
            return Ingested(
                counts=ItemCounts(unchanged=len(stored.hashes),
                                  failed=len(stored.failed)).as_dict(),
                rows=len(stored.hashes), location=location, seconds=watch.seconds,
                figures={"files": len(stored.file_rows), "files_changed": False})
        if settings is None and stored.hashes:
            run.warn(f"source {source!r} is not configured: removing its "
                     f"{len(stored.hashes)} tickets")
        with run.connect() as conn:
            ticket_set = (read_changed_export(conn, source, settings, stored, run.limits)
                          if settings else TicketSet())
    except TicketError as exc:  # the export vanished
        raise SourceUnreachable(str(exc)) from exc
    watch.lap("parse")
    with run.connect() as conn:
        written = write_ticket_set(conn, source, ticket_set, settings, stored, run.now)
    watch.lap("write")
    return Ingested(
        counts=written.counts.as_dict(), rows=sum(written.by_system.values()),
        location=location, failures=written.failures,
        preview=[{"key": r["key"], "summary": r["summary"], "status": r["status"],
                  "updated": r["updated_at"]} for r in written.rows],
        preview_columns=("key", "summary", "status", "updated"),
        figures={"files": len(ticket_set.files), "files_changed": written.files_changed,
                 "files_reused": ticket_set.reused_files},
        tables={"tickets_by_system": written.by_system}, seconds=watch.seconds)
