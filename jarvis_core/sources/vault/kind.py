"""The vault kind: Obsidian-style markdown vaults, one note per document."""

from __future__ import annotations

from jarvis_core.sources.kind import (
    DocumentType,
    FailedRatio,
    RawAsset,
    SourceKind,
)
from jarvis_core.sources.vault.changes import WATCH
from jarvis_core.sources.vault.settings import VaultConfig

VAULT = SourceKind(
    name="vault", package=__package__, section="vaults", label="vault", settings=VaultConfig,
    asset=RawAsset(
        "raw_notes",
        "Notes of one vault (partition) with frontmatter, tags, links, embeds and headings.\n\n"
        "Only notes whose size, mtime and then content hash changed are re-read and re-parsed; "
        "deleted notes are removed; unreadable files are recorded in ``ingest_failures``.",
        ("duckdb", "markdown")),
    documents=(DocumentType("note", """
        SELECT source, 'note' AS source_type, note_key AS doc_key, path, title, body AS text,
               content_hash AS doc_hash, modified_at, tags, [lower(title)] AS names
        FROM notes WHERE source = $1""", from_file=True),),
    serving={"notes": "SELECT * EXCLUDE (body) FROM notes",
             "attachments": "SELECT * FROM attachments"},
    counts={"notes": "notes", "attachments": "attachments"},
    ingested="notes",
    watch=WATCH,
    failed_ratio=FailedRatio("failed_file_ratio", "files"),
)
