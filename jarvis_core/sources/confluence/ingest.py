"""A Confluence export's rows in the tables: what earlier runs stored, turned back into the
parser's objects (so unchanged files and stored page versions are not converted again), and
writing what a read found.

Pages are counted by their document's content hash, as the chunks layer counts them; a row
is rewritten whenever anything on it changed (a link now resolving, a move to another file).
Files and pages that could not be read are ``ingest_failures`` rows (``<file>#<item>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from jarvis_core.sources.changes import file_hashes
from jarvis_core.sources.confluence.pages import PAGE_VERSION
from jarvis_core.sources.confluence.read import (
    ConfluenceError,
    ConfluencePage,
    ConfluenceRead,
    ExportFile,
    PageAttachment,
    PageLink,
    PageRef,
    read_confluence_export,
)
from jarvis_core.sources.confluence.tables import PAGE_FILES, PAGES
from jarvis_core.sources.export_rows import (
    changes,
    failure_rows,
    identity_of,
    identity_row,
    ingest_export,
    row_hash,
    warning_count,
)
from jarvis_core.sources.kind import Ingested, IngestRun
from jarvis_core.sources.listings import confluence_files
from jarvis_core.sources.people import identities_of
from jarvis_core.sources.plan import ItemCounts
from jarvis_core.stores import tables

CONFLUENCE_KIND = "confluence"


def export_file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every export file by relative path; ConfluenceError for a missing export."""
    if not root.exists():
        raise ConfluenceError(f"Confluence export path does not exist: {root}")
    return file_hashes(confluence_files(root))


def page_row(source: str, page: ConfluencePage) -> dict:
    row = {
        "source": source, "page_id": page.page_id, "kind": page.kind, "space": page.space,
        "title": page.title, "parent_id": page.parent_id,
        "ancestors": [{"page_id": a.page_id, "title": a.title} for a in page.ancestors],
        "author": identity_row(page.author), "editor": identity_row(page.editor),
        "created_at": page.created_at, "updated_at": page.updated_at,
        "labels": list(page.labels), "version": page.version, "revision": page.revision,
        "text": page.text,
        "links": [{"page_id": link.page_id, "title": link.title, "space": link.space,
                   "written": link.written} for link in page.links],
        "jira_keys": list(page.jira_keys),
        "mentions": [identity_row(p) for p in page.mentions],
        "attachments": [{"name": a.name, "media_type": a.media_type, "size": a.size,
                         "attachment_id": a.attachment_id} for a in page.attachments],
        "url": page.url, "file": page.file, "item": page.item, "warnings": list(page.warnings),
        "content_hash": page.content_hash, "parser_version": PAGE_VERSION}
    return {**row, "row_hash": row_hash(row)}


def page_of(row: dict) -> ConfluencePage:
    return ConfluencePage(
        page_id=row["page_id"], kind=row["kind"], space=row["space"], title=row["title"],
        parent_id=row["parent_id"],
        ancestors=tuple(PageRef(a["page_id"], a["title"]) for a in row["ancestors"] or ()),
        author=identity_of(row["author"]), editor=identity_of(row["editor"]),
        created_at=row["created_at"], updated_at=row["updated_at"],
        labels=tuple(row["labels"] or ()), version=row["version"], revision=row["revision"],
        text=row["text"],
        links=tuple(PageLink(link["page_id"], link["title"], link["space"], link["written"])
                    for link in row["links"] or ()),
        jira_keys=tuple(row["jira_keys"] or ()),
        mentions=tuple(identity_of(p) for p in row["mentions"] or ()),
        attachments=tuple(PageAttachment(a["name"], a["media_type"], a["size"],
                                         a["attachment_id"]) for a in row["attachments"] or ()),
        url=row["url"], file=row["file"], item=row["item"],
        warnings=tuple(row["warnings"] or ()), content_hash=row["content_hash"])


@dataclass(frozen=True)
class StoredPages:
    """What earlier runs stored: the export files with their hashes and entries, each page's
    content and row hash, whether every page was made by this parser version, and how many
    items failed."""

    file_rows: list[dict]
    content: dict[str, str]
    rows: dict[str, str]
    current_parser: bool
    failed: int

    @property
    def hashes(self) -> dict[str, str]:
        return {row["path"]: row["file_hash"] for row in self.file_rows}

    def unchanged(self, hashes: dict[str, str]) -> bool:
        """Every export file hashes as stored and the pages were made as they would be now."""
        return bool(self.file_rows) and self.current_parser and self.hashes == hashes

    @property
    def files(self) -> dict[str, ExportFile]:
        """The read state of every export entry (a page file, a REST file, a zip member)."""
        return {entry["path"]: ExportFile(
            entry["path"], entry["digest"], tuple(entry["page_ids"] or ()),
            tuple((f["item"], f["reason"]) for f in entry["failures"] or ()))
            for row in self.file_rows for entry in row["entries"] or ()}


def read_stored(conn: duckdb.DuckDBPyConnection, source: str) -> StoredPages:
    versions = dict(conn.execute("SELECT page_id, parser_version FROM pages WHERE source = ?",
                                 [source]).fetchall())
    return StoredPages(
        tables.read_frame(conn, "SELECT * EXCLUDE (source) FROM page_files WHERE source = ?",
                          [source]).to_dicts(),
        dict(conn.execute("SELECT page_id, content_hash FROM pages WHERE source = ?",
                          [source]).fetchall()),
        dict(conn.execute("SELECT page_id, row_hash FROM pages WHERE source = ?",
                          [source]).fetchall()),
        all(version == PAGE_VERSION for version in versions.values()),
        conn.execute("SELECT count(*) FROM ingest_failures WHERE source = ?",
                     [source]).fetchone()[0])


def stored_pages(conn: duckdb.DuckDBPyConnection, source: str) -> dict[str, ConfluencePage]:
    """The stored pages this parser version made, by id (read only when some file changed;
    pages of an older version are converted again)."""
    return {row["page_id"]: page_of(row) for row in tables.read_frame(
        conn, "SELECT * FROM pages WHERE source = ? AND parser_version = ?",
        [source, PAGE_VERSION]).iter_rows(named=True)}


def known_people(conn: duckdb.DuckDBPyConnection, source: str) -> list:
    """The people other sources' graphs know (Jira users with their account ids), so a
    mention the export names only by account id gets a name."""
    return identities_of(properties for (properties,) in conn.execute(
        "SELECT properties FROM graph_nodes WHERE type = 'person' AND source <> ?",
        [source]).fetchall())


def _entries(path: str, read: ConfluenceRead) -> list[dict]:
    """The read entries of one export file: itself, or the members of a zip."""
    return [{"path": entry.path, "digest": entry.digest, "page_ids": list(entry.page_ids),
             "failures": [{"item": item, "reason": reason} for item, reason in entry.failures]}
            for key, entry in sorted(read.files.items())
            if key == path or key.startswith(path + "/")]


@dataclass(frozen=True)
class PageWrite:
    """What writing an export read did."""

    counts: ItemCounts
    rows: list[dict]              # the pages written, without text
    failures: list[dict]
    warnings: int


def write_pages(conn: duckdb.DuckDBPyConnection, source: str, read: ConfluenceRead,
                hashes: dict[str, str], stored: StoredPages, now: datetime) -> PageWrite:
    """Rewrite the pages whose row changed, remove those gone, record every export file's
    hash and entries and the per-item failures."""
    rows = {page_id: page_row(source, page) for page_id, page in read.pages.items()}
    counted = changes({key: row["content_hash"] for key, row in rows.items()}, stored.content)
    rewritten = changes({key: row["row_hash"] for key, row in rows.items()}, stored.rows)
    written = [{**rows[key], "ingested_at": now}
               for key in rewritten["new"] + rewritten["changed"]]
    failures = failure_rows(source, read.problems, now)
    tables.replace_rows(conn, PAGES, source=source,
                        remove_paths=rewritten["changed"] + rewritten["deleted"],
                        rows=written, key_column="page_id")
    for table, table_rows in (
            (PAGE_FILES, [{"source": source, "path": path, "file_hash": digest,
                             "entries": _entries(path, read)}
                            for path, digest in sorted(hashes.items())]),
            (tables.INGEST_FAILURES, failures)):
        tables.replace_rows(conn, table, source=source, remove_paths=None, rows=table_rows)
    counts = ItemCounts(*(len(counted[name]) for name in ("new", "changed", "unchanged",
                                                          "deleted")), failed=len(failures))
    return PageWrite(counts, [{k: v for k, v in row.items() if k != "text"} for row in written],
                     failures, warning_count(read.problems))


def page_figures(conn: duckdb.DuckDBPyConnection, source: str) -> dict[str, int]:
    """Stored totals of an export, with pages by space."""
    pages, files, failed = conn.execute(
        "SELECT (SELECT count(*) FROM pages WHERE source = $1), "
        "(SELECT count(*) FROM page_files WHERE source = $1), "
        "(SELECT count(*) FROM ingest_failures WHERE source = $1)", [source]).fetchone()
    spaces = dict(conn.execute("SELECT coalesce(space, '(none)'), count(*) FROM pages "
                               "WHERE source = ? GROUP BY 1 ORDER BY 1", [source]).fetchall())
    return {"pages": pages, "page_files": files, "failed": failed, "pages_by_space": spaces}


def read_changed_export(conn: duckdb.DuckDBPyConnection, source: str, root: Path,
                        stored: StoredPages) -> ConfluenceRead:
    """Read the export, taking unchanged files and stored page versions from the rows."""
    return read_confluence_export(root, files=stored.files, pages=stored_pages(conn, source),
                                  people=known_people(conn, source))


def _written(conn: duckdb.DuckDBPyConnection, run: IngestRun, read: ConfluenceRead,
             hashes: dict[str, str], stored: StoredPages) -> Ingested:
    written = write_pages(conn, run.source, read, hashes, stored, run.now)
    figures = page_figures(conn, run.source)
    return Ingested(
        counts=written.counts.as_dict(), rows=figures["pages"], location=None,
        failures=written.failures, preview=written.rows,
        preview_columns=("space", "title", "version", "updated_at"),
        figures={"files": figures["page_files"], "files_changed": True,
                 "pages_converted": read.parsed, "pages_reused": read.reused,
                 "pages_skipped": read.skipped, "warnings": written.warnings},
        tables={"pages_by_space": figures["pages_by_space"]})


def ingest(run: IngestRun) -> Ingested:
    """The export files that changed read (a stored page version is not converted again),
    the pages that changed rewritten."""
    return ingest_export(run, read_stored=read_stored, file_hashes=export_file_hashes,
                         read_changed=read_changed_export, nothing_read=ConfluenceRead,
                         vanished=ConfluenceError,
                         unchanged_counts=lambda stored: (len(stored.content),
                                                          len(stored.content)),
                         write=_written)
