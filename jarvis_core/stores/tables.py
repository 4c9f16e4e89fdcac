"""The DuckDB tables of Jarvis, declared once as polars schemas.

The pipeline writes them (through dagster-duckdb) and the query side reads them; both
take the table layout from here, so the DDL is generated from the polars schemas the
writers build their frames with.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb
import polars as pl

from jarvis_core.stores.transaction import transaction

_WIKILINK = pl.Struct({"target": pl.Utf8, "heading": pl.Utf8, "block": pl.Utf8,
                       "alias": pl.Utf8, "embed": pl.Boolean, "line": pl.Int32})
_LINK = pl.Struct({"url": pl.Utf8, "text": pl.Utf8, "line": pl.Int32,
                   "image": pl.Boolean, "bare": pl.Boolean})
_HEADING = pl.Struct({"level": pl.Int32, "text": pl.Utf8, "line": pl.Int32})
_RELATION = pl.Struct({"subject": pl.Utf8, "relation": pl.Utf8, "object": pl.Utf8,
                       "line": pl.Int32})
_TAG_LINES = pl.Struct({"tag": pl.Utf8, "lines": pl.List(pl.Int32)})

NOTES = pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "note_key": pl.Utf8, "title": pl.Utf8,
    "size_bytes": pl.Int64, "mtime_ns": pl.Int64, "content_hash": pl.Utf8,
    "parser_version": pl.Int32, "frontmatter": pl.Utf8, "frontmatter_error": pl.Utf8,
    "aliases": pl.List(pl.Utf8), "tags": pl.List(pl.Utf8), "tag_lines": pl.List(_TAG_LINES),
    "wikilinks": pl.List(_WIKILINK), "embeds": pl.List(_WIKILINK), "links": pl.List(_LINK),
    "headings": pl.List(_HEADING), "block_ids": pl.List(pl.Utf8),
    "relations": pl.List(_RELATION), "frontmatter_links": pl.Utf8,
    "created_at": pl.Datetime("us"), "modified_at": pl.Datetime("us"),
    "body": pl.Utf8, "body_start_line": pl.Int32, "word_count": pl.Int32,
    "warnings": pl.List(pl.Utf8), "ingested_at": pl.Datetime("us"),
})

ATTACHMENTS = pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "extension": pl.Utf8,
    "size_bytes": pl.Int64, "mtime_ns": pl.Int64,
})

INGEST_FAILURES = pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "reason": pl.Utf8,
    "size_bytes": pl.Int64, "mtime_ns": pl.Int64, "detected_at": pl.Datetime("us"),
})

CHUNKS = pl.Schema({
    "chunk_id": pl.Utf8, "source": pl.Utf8, "source_type": pl.Utf8, "doc_key": pl.Utf8,
    "path": pl.Utf8, "title": pl.Utf8, "position": pl.Int32,
    "heading_path": pl.List(pl.Utf8), "context": pl.Utf8, "text": pl.Utf8,
    "token_count": pl.Int32,
    "char_start": pl.Int32, "char_end": pl.Int32, "doc_hash": pl.Utf8,
})

CHUNKED_DOCUMENTS = pl.Schema({
    "source": pl.Utf8, "doc_key": pl.Utf8, "path": pl.Utf8, "doc_hash": pl.Utf8,
    "chunk_config": pl.Utf8, "chunk_count": pl.Int32,
})

GRAPH_NODES = pl.Schema({
    "source": pl.Utf8, "node_key": pl.Utf8, "type": pl.Utf8, "title": pl.Utf8,
    "node_source": pl.Utf8, "properties": pl.Utf8,
    "first_seen": pl.Datetime("us"), "last_seen": pl.Datetime("us"),
})

GRAPH_EDGES = pl.Schema({
    "edge_key": pl.Utf8, "source": pl.Utf8, "origin": pl.Utf8, "src": pl.Utf8, "dst": pl.Utf8,
    "relation": pl.Utf8, "confidence": pl.Utf8, "extractor": pl.Utf8,
    "evidence": pl.List(pl.Utf8), "evidence_text": pl.Utf8, "weight": pl.Float64,
})

BROKEN_LINKS = pl.Schema({
    "source": pl.Utf8, "origin": pl.Utf8, "target": pl.Utf8, "reason": pl.Utf8,
    "candidates": pl.List(pl.Utf8), "line": pl.Int32, "evidence": pl.List(pl.Utf8),
})

CHUNK_MENTIONS = pl.Schema({
    "source": pl.Utf8, "origin": pl.Utf8, "chunk_id": pl.Utf8, "node_key": pl.Utf8,
})

GRAPH_ORIGINS = pl.Schema({
    "source": pl.Utf8, "origin": pl.Utf8, "fingerprint": pl.Utf8,
    "extracted_at": pl.Datetime("us"),
})

# Git repositories (jarvis_core/sources/repo/sync.py): commits reachable from the configured branch,
# the files each changed, the files and docs at its head, and the head last ingested.
COMMITS = pl.Schema({
    "source": pl.Utf8, "sha": pl.Utf8, "parents": pl.List(pl.Utf8),
    "author_name": pl.Utf8, "author_email": pl.Utf8, "authored_at": pl.Datetime("us"),
    "committer_name": pl.Utf8, "committer_email": pl.Utf8, "committed_at": pl.Datetime("us"),
    "subject": pl.Utf8, "message": pl.Utf8, "files_changed": pl.Int32,
    "additions": pl.Int32, "deletions": pl.Int32, "ingested_at": pl.Datetime("us"),
})

COMMIT_FILES = pl.Schema({
    "source": pl.Utf8, "sha": pl.Utf8, "path": pl.Utf8, "old_path": pl.Utf8,
    "additions": pl.Int32, "deletions": pl.Int32, "binary": pl.Boolean,
})

REPO_FILES = pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "language": pl.Utf8, "size_bytes": pl.Int64,
    "blob_sha": pl.Utf8,
})

REPO_DOCS = pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8, "blob_sha": pl.Utf8,
    "modified_at": pl.Datetime("us"),
})

REPO_KNOWLEDGE = pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "blob_sha": pl.Utf8, "components": pl.Utf8,
    "error": pl.Utf8,
})

# Ticket sets (jarvis_core/sources/tickets/): one row per ticket with its comments and issue links,
# ``text`` being the markdown it is chunked as; the hash of every export file read.
_PERSON = pl.Struct({"name": pl.Utf8, "email": pl.Utf8, "account": pl.Utf8})
TICKETS = pl.Schema({
    "source": pl.Utf8, "key": pl.Utf8, "path": pl.Utf8, "file_hash": pl.Utf8,
    "system": pl.Utf8, "number": pl.Int64, "repo": pl.Utf8, "summary": pl.Utf8,
    "description": pl.Utf8, "status": pl.Utf8, "type": pl.Utf8, "priority": pl.Utf8,
    "labels": pl.List(pl.Utf8), "components": pl.List(pl.Utf8),
    "fix_versions": pl.List(pl.Utf8), "assignee": _PERSON, "reporter": _PERSON,
    "created_at": pl.Datetime("us"), "updated_at": pl.Datetime("us"),
    "resolved_at": pl.Datetime("us"),
    "comments": pl.List(pl.Struct({"author": _PERSON, "created_at": pl.Datetime("us"),
                                   "body": pl.Utf8})),
    "links": pl.List(pl.Struct({"type": pl.Utf8, "direction": pl.Utf8, "phrase": pl.Utf8,
                                "outward": pl.Utf8, "target": pl.Utf8})),
    "url": pl.Utf8, "is_pull_request": pl.Boolean, "text": pl.Utf8, "content_hash": pl.Utf8,
    "warnings": pl.List(pl.Utf8), "ingested_at": pl.Datetime("us"),
})

TICKET_FILES = pl.Schema({"source": pl.Utf8, "path": pl.Utf8, "file_hash": pl.Utf8,
                          "keys": pl.List(pl.Utf8)})

# Mail sources (jarvis_core/sources/mail/read*.py): every message as read, the threads they form
# (``text`` is the thread document that is chunked), and what was read from each mail file
# (an mbox's digest and offset, so a grown mbox is read from where the last run stopped).
_IDENTITY = pl.Struct({"name": pl.Utf8, "email": pl.Utf8, "aliases": pl.List(pl.Utf8)})
MAIL_MESSAGES = pl.Schema({
    "source": pl.Utf8, "message_id": pl.Utf8, "thread_id": pl.Utf8, "file": pl.Utf8,
    "item": pl.Utf8, "sent_at": pl.Datetime("us"), "sender": _IDENTITY,
    "recipients": pl.List(_IDENTITY), "cc": pl.List(_IDENTITY), "subject": pl.Utf8,
    "in_reply_to": pl.Utf8, "reference_ids": pl.List(pl.Utf8), "body": pl.Utf8,
    "body_type": pl.Utf8,
    "attachments": pl.List(pl.Struct({"filename": pl.Utf8, "content_type": pl.Utf8,
                                      "size": pl.Int64, "part": pl.Utf8})),
    "warnings": pl.List(pl.Utf8), "derived_id": pl.Boolean, "row_hash": pl.Utf8,
    "ingested_at": pl.Datetime("us"),
})
MAIL_THREADS = pl.Schema({
    "source": pl.Utf8, "thread_id": pl.Utf8, "subject": pl.Utf8,
    "message_ids": pl.List(pl.Utf8), "message_count": pl.Int32,
    "participants": pl.List(_IDENTITY), "started_at": pl.Datetime("us"),
    "last_at": pl.Datetime("us"), "text": pl.Utf8,
    "sections": pl.List(pl.Struct({"message_id": pl.Utf8, "char_start": pl.Int32,
                                   "char_end": pl.Int32})),
    "content_hash": pl.Utf8, "ingested_at": pl.Datetime("us"),
})
_ITEM_FAILURE = pl.Struct({"item": pl.Utf8, "reason": pl.Utf8})
MAIL_FILES = pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "kind": pl.Utf8, "file_hash": pl.Utf8,
    "digest": pl.Utf8, "bytes_read": pl.Int64, "message_count": pl.Int64,
    "messages": pl.List(pl.Struct({"message_id": pl.Utf8, "item": pl.Utf8})),
    "failures": pl.List(_ITEM_FAILURE),
})

# Confluence exports (jarvis_core/sources/confluence/read*.py): one row per current page (``text``
# is its document), and per export file its hash and the pages each of its entries (a zip
# holds many) gave.
PAGES = pl.Schema({
    "source": pl.Utf8, "page_id": pl.Utf8, "kind": pl.Utf8, "space": pl.Utf8,
    "title": pl.Utf8, "parent_id": pl.Utf8,
    "ancestors": pl.List(pl.Struct({"page_id": pl.Utf8, "title": pl.Utf8})),
    "author": _IDENTITY, "editor": _IDENTITY, "created_at": pl.Datetime("us"),
    "updated_at": pl.Datetime("us"), "labels": pl.List(pl.Utf8), "version": pl.Int64,
    "revision": pl.Utf8, "text": pl.Utf8,
    "links": pl.List(pl.Struct({"page_id": pl.Utf8, "title": pl.Utf8, "space": pl.Utf8,
                                "written": pl.Utf8})),
    "jira_keys": pl.List(pl.Utf8), "mentions": pl.List(_IDENTITY),
    "attachments": pl.List(pl.Struct({"name": pl.Utf8, "media_type": pl.Utf8,
                                      "size": pl.Int64, "attachment_id": pl.Utf8})),
    "url": pl.Utf8, "file": pl.Utf8, "item": pl.Utf8, "warnings": pl.List(pl.Utf8),
    "content_hash": pl.Utf8, "parser_version": pl.Int32, "row_hash": pl.Utf8,
    "ingested_at": pl.Datetime("us"),
})
PAGE_FILES = pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "file_hash": pl.Utf8,
    "entries": pl.List(pl.Struct({"path": pl.Utf8, "digest": pl.Utf8,
                                  "page_ids": pl.List(pl.Utf8),
                                  "failures": pl.List(_ITEM_FAILURE)})),
})

# References a source's graph run could not resolve inside the source (jarvis_core/
# references.py), and those the cross_source_links asset could not resolve in any source.
_REFERENCE = {
    "source": pl.Utf8, "origin": pl.Utf8, "src": pl.Utf8, "relation": pl.Utf8,
    "kind": pl.Utf8, "target": pl.Utf8, "written": pl.Utf8, "line": pl.Int32,
    "evidence": pl.List(pl.Utf8), "evidence_text": pl.Utf8, "inverse": pl.Boolean,
}
GRAPH_REFERENCES = pl.Schema(_REFERENCE)
UNRESOLVED_REFERENCES = pl.Schema({**_REFERENCE, "reason": pl.Utf8,
                                   "candidates": pl.List(pl.Utf8)})

REPO_STATE = pl.Schema({
    "source": pl.Utf8, "branch": pl.Utf8, "head": pl.Utf8, "shallow": pl.Boolean,
    "commit_count": pl.Int64, "settings": pl.Utf8, "ingested_at": pl.Datetime("us"),
})

# Vault analytics history (jarvis_core/analytics/): one row per snapshot, its figures as
# JSON, and the per-note rows of each snapshot.
ANALYTICS_SNAPSHOTS = pl.Schema({
    "source": pl.Utf8, "snapshot_id": pl.Utf8, "generated_at": pl.Datetime("us"),
    "content_hash": pl.Utf8, "notes": pl.Int64, "words": pl.Int64, "links": pl.Int64,
    "orphans": pl.Int64, "dead_ends": pl.Int64, "broken_links": pl.Int64,
    "stale_notes": pl.Int64, "communities": pl.Int64, "modularity": pl.Float64,
    "mean_quality": pl.Float64, "compute_seconds": pl.Float64, "figures": pl.Utf8,
})

ANALYTICS_NOTES = pl.Schema({
    "source": pl.Utf8, "snapshot_id": pl.Utf8, "note_key": pl.Utf8, "path": pl.Utf8,
    "title": pl.Utf8, "folder": pl.Utf8, "words": pl.Int64, "headings": pl.Int64,
    "frontmatter": pl.Boolean, "links_out": pl.Int64, "links_in": pl.Int64, "degree": pl.Int64,
    "pagerank": pl.Float64, "community": pl.Int64, "quality": pl.Float64,
    "orphan": pl.Boolean, "dead_end": pl.Boolean, "stale": pl.Boolean,
    "modified_at": pl.Datetime("us"),
})

TABLES: dict[str, tuple[pl.Schema, tuple[str, ...]]] = {
    "notes": (NOTES, ("source", "path")),
    "attachments": (ATTACHMENTS, ("source", "path")),
    "ingest_failures": (INGEST_FAILURES, ("source", "path")),
    "chunks": (CHUNKS, ()),  # uniqueness of chunk_id is an asset check, not a constraint
    "chunked_documents": (CHUNKED_DOCUMENTS, ("source", "doc_key")),
    "graph_nodes": (GRAPH_NODES, ("source", "node_key")),
    "graph_edges": (GRAPH_EDGES, ()),  # dangling or duplicate edges are asset checks
    "graph_broken_links": (BROKEN_LINKS, ()),
    "chunk_mentions": (CHUNK_MENTIONS, ()),
    "graph_origins": (GRAPH_ORIGINS, ("source", "origin")),
    "commits": (COMMITS, ("source", "sha")),
    "commit_files": (COMMIT_FILES, ()),  # a commit may list a path twice (a copy and an edit)
    "repo_files": (REPO_FILES, ("source", "path")),
    "repo_docs": (REPO_DOCS, ("source", "path")),
    "repo_knowledge": (REPO_KNOWLEDGE, ("source", "path")),
    "repo_state": (REPO_STATE, ("source",)),
    "analytics_snapshots": (ANALYTICS_SNAPSHOTS, ("source", "snapshot_id")),
    "analytics_notes": (ANALYTICS_NOTES, ("source", "snapshot_id", "note_key")),
    "tickets": (TICKETS, ("source", "key")),
    "ticket_files": (TICKET_FILES, ("source", "path")),
    "mail_messages": (MAIL_MESSAGES, ("source", "message_id")),
    "mail_threads": (MAIL_THREADS, ("source", "thread_id")),
    "mail_files": (MAIL_FILES, ("source", "path")),
    "pages": (PAGES, ("source", "page_id")),
    "page_files": (PAGE_FILES, ("source", "path")),
    "graph_references": (GRAPH_REFERENCES, ()),
    "unresolved_references": (UNRESOLVED_REFERENCES, ()),
}

# The raw tables of each source kind: a source with rows in any of them has data to purge
# once it is no longer configured.
RAW_TABLES = ("notes", "commits", "repo_files", "repo_docs", "tickets", "mail_messages",
              "pages")

_SCALARS = {
    pl.Utf8: "VARCHAR", pl.Int64: "BIGINT", pl.Int32: "INTEGER",
    pl.Boolean: "BOOLEAN", pl.Float64: "DOUBLE", pl.Float32: "FLOAT",
}


def duckdb_type(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.List):
        return f"{duckdb_type(dtype.inner)}[]"
    if isinstance(dtype, pl.Struct):
        fields = ", ".join(f'"{f.name}" {duckdb_type(f.dtype)}' for f in dtype.fields)
        return f"STRUCT({fields})"
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMP"
    return _SCALARS[dtype.base_type()]


def create_table_sql(name: str) -> str:
    schema, key = TABLES[name]
    columns = [f'"{col}" {duckdb_type(dtype)}' for col, dtype in schema.items()]
    if key:
        columns.append(f"PRIMARY KEY ({', '.join(key)})")
    return f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(columns)})"


def ensure_schema(conn: duckdb.DuckDBPyConnection) -> None:
    """Create missing tables and add columns a newer release declares to existing ones
    (their values are filled when the version bump re-processes the rows). The catalog is
    read once: a statement per declared column took a third of a second per run."""
    present: dict[str, set[str]] = {}
    for table, column in conn.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE schema_name = current_schema()").fetchall():
        present.setdefault(table, set()).add(column)
    for name, (schema, _) in TABLES.items():
        if name not in present:
            conn.execute(create_table_sql(name))
            continue
        for column, dtype in schema.items():
            if column not in present[name]:
                conn.execute(f'ALTER TABLE {name} ADD COLUMN "{column}" {duckdb_type(dtype)}')


def frame(table: str, rows: Iterable[dict]) -> pl.DataFrame:
    """Rows as a frame with the table's exact schema (so empty lists keep their types)."""
    return pl.DataFrame(list(rows), schema=TABLES[table][0], orient="row")


def replace_rows(
    conn: duckdb.DuckDBPyConnection,
    table: str,
    *,
    source: str,
    remove_paths: Iterable[str] | None,
    rows: pl.DataFrame,
    key_column: str = "path",
) -> None:
    """Delete a source's rows whose ``key_column`` is in ``remove_paths`` (all of them for
    None), then insert ``rows``, in one transaction so readers never see half a refresh."""
    remove = pl.DataFrame({"p": sorted(set(remove_paths or ()))}, schema={"p": pl.Utf8})
    try:
        with transaction(conn):
            if remove_paths is None:
                conn.execute(f"DELETE FROM {table} WHERE source = ?", [source])
            else:
                conn.register("jarvis_remove", remove.to_arrow())
                conn.execute(f'DELETE FROM {table} WHERE source = ? AND "{key_column}" IN '
                             "(SELECT p FROM jarvis_remove)", [source])
            if rows.height:
                conn.register("jarvis_rows", rows.to_arrow())
                conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM jarvis_rows")
    finally:
        for view in ("jarvis_remove", "jarvis_rows"):
            try:
                conn.unregister(view)
            except duckdb.Error:
                pass




def read_frame(conn: duckdb.DuckDBPyConnection, sql: str,
               params: list | None = None) -> pl.DataFrame:
    return conn.execute(sql, params or []).pl()
