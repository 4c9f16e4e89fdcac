"""The Confluence kind: HTML space exports and REST content JSON, one page per document."""

from __future__ import annotations

from jarvis_core.sources.changes import export_watch
from jarvis_core.sources.confluence.settings import ConfluenceConfig
from jarvis_core.sources.kind import (
    Details,
    DocumentType,
    FailedRatio,
    RawAsset,
    SourceKind,
    person,
)
from jarvis_core.sources.listings import confluence_files

CONFLUENCE = SourceKind(
    name="confluence", package=__package__, section="confluence", label="Confluence export",
    settings=ConfluenceConfig,
    asset=RawAsset(
        "raw_pages",
        "Pages of one Confluence export (partition): the HTML space export (zip or folder) or "
        "REST content JSON, each page with its space, ancestors, people, labels, links, Jira "
        "keys and attachments listed, its body as text with headings kept.\n\nWhen every "
        "export file hashes as before nothing is read; otherwise unchanged files give their "
        "stored pages and a stored page version is not converted again. Only pages that "
        "changed are rewritten; pages gone from the export (or trashed) are deleted. Files and "
        "pages that cannot be read are recorded in ``ingest_failures`` and the rest goes on.",
        ("duckdb", "html")),
    documents=(DocumentType("page", """
        SELECT source, 'page' AS source_type, 'page:' || source || '/' || page_id AS doc_key,
               'pages/' || page_id AS path, title, text, content_hash AS doc_hash,
               coalesce(updated_at, created_at) AS modified_at, labels AS tags,
               [lower(page_id), lower(title)] AS names
        FROM pages WHERE source = $1""", Details(facts=f"""
        SELECT created_at, warnings, space,
               list_transform(ancestors, a -> a.title) AS ancestors,
               {person('author')} AS author, {person('editor')} AS editor, version, url,
               list_transform(attachments, a -> a.name) AS attachments
        FROM pages WHERE source = $1 AND 'pages/' || page_id = $2""")),),
    serving={"pages": "SELECT * EXCLUDE (text) FROM pages",
             "page_files": "SELECT source, path, file_hash FROM page_files"},
    counts={"pages": "pages"},
    ingested="pages",
    watch=export_watch(confluence_files, "page_files"),
    failed_ratio=FailedRatio("failed_page_ratio", "export files and pages"),
)
