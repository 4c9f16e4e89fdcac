"""The ticket kind: Jira and GitHub issue exports, one ticket per document."""

from __future__ import annotations

from jarvis_core.sources.changes import export_watch
from jarvis_core.sources.kind import (
    Details,
    DocumentType,
    FailedRatio,
    RawAsset,
    SourceKind,
    person,
)
from jarvis_core.sources.listings import ticket_files
from jarvis_core.sources.tickets.settings import TicketsConfig

TICKETS = SourceKind(
    name="tickets", package=__package__, section="tickets", label="ticket set",
    settings=TicketsConfig,
    asset=RawAsset(
        "raw_tickets",
        "Tickets of one ticket set (partition): Jira REST issues and search pages, GitHub "
        "issues and pull requests, each with its description, comments and links.\n\n"
        "An export whose files all hash as before is not parsed again; otherwise only changed "
        "files are parsed (a Jira file that hashes as before gives its stored tickets), and "
        "only tickets whose content hash changed are rewritten (the newest ``updated`` wins "
        "between copies of one key); removed tickets are deleted. Files and issues that "
        "cannot be read are recorded in ``ingest_failures`` and the rest goes on.",
        ("duckdb", "json")),
    documents=(DocumentType("ticket", """
        SELECT source, 'ticket' AS source_type, 'ticket:' || source || '/' || key AS doc_key,
               'tickets/' || key AS path, key || ': ' || summary AS title, text,
               content_hash AS doc_hash, coalesce(updated_at, created_at) AS modified_at,
               labels AS tags,
               -- a GitHub issue is also named owner/repo#12, as GitHub writes references
               list_filter([lower(key), lower(nullif(regexp_extract(
                   url, 'github[.]com/([^/]+/[^/]+)/(?:issues|pull)/', 1), '') || '#' || number)],
                   name -> name IS NOT NULL) AS names
        FROM tickets WHERE source = $1""", Details(
        facts=f"""
            SELECT created_at, warnings, status, type, priority,
                   {person('assignee')} AS assignee, {person('reporter')} AS reporter,
                   resolved_at, components, fix_versions, len(comments) AS comments, url
            FROM tickets WHERE source = $1 AND 'tickets/' || key = $2""",
        lists={"issue_links": """
            SELECT l.target, l.phrase, l.type, l.direction
            FROM (SELECT unnest(links) AS l FROM tickets
                  WHERE source = $1 AND 'tickets/' || key = $2)"""})),),
    serving={"tickets": "SELECT * EXCLUDE (text) FROM tickets",
             "ticket_files": "SELECT * FROM ticket_files"},
    counts={"tickets": "tickets"},
    ingested="tickets",
    watch=export_watch(ticket_files, "ticket_files"),
    failed_ratio=FailedRatio("failed_ticket_ratio", "export files and issues"),
)
