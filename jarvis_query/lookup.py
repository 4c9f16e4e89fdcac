"""Finding the document a person names, in the published tables: a note by path or title,
any other document by its key or a name its kind gives it (jarvis_core/sources/kind.py:
a ticket's key, a commit's hash, a page's title, a thread's Message-IDs)."""

from __future__ import annotations

from jarvis_core.config import JarvisConfig
from jarvis_query.results import sql_strings
from jarvis_query.snapshot import Snapshot
from jarvis_query.validation import QueryError, shown


class NoteNotFound(QueryError):
    """No published note has the path or title asked for."""


def find_note(config: JarvisConfig, snapshot: Snapshot, note: str) -> tuple[str, str, str]:
    """(note key, vault, path) for a vault-relative path (".md" optional, a vault name may
    lead it) or a title; QueryError when it names no note or several."""
    wanted = note.strip().strip("/")
    vault, _, rest = wanted.partition("/")
    candidates = {wanted, wanted + ".md"}
    if vault in config.sources_of("vault") and rest:
        candidates |= {rest, rest + ".md"}
    rows = snapshot.cursor().execute(
        "SELECT note_key, source, path FROM notes "
        f"WHERE path IN ({sql_strings(sorted(candidates))}) "
        "OR lower(title) = lower(?) ORDER BY source, path", [wanted]).fetchall()
    if vault in config.sources_of("vault") and rest:
        rows = [row for row in rows if row[1] == vault] or rows
    if not rows:
        raise NoteNotFound(f"Note not found: '{shown(note)}'")
    if len(rows) > 1:
        places = ", ".join(f"{source}/{path}" for _, source, path in rows)
        raise QueryError(f"'{shown(note)}' names several notes: {places}; give the path")
    return rows[0]


def find_document(config: JarvisConfig, snapshot: Snapshot, name: str) -> tuple[str, str, str]:
    """(document key, source, path) of a note (as ``find_note``), else of the document of
    any kind that ``name`` names: its key, or one of the names its kind gives it (a ticket's
    key 'LUM-4' or 'lumen#7', a page's id or title, a thread's or any of its messages'
    Message-ID), or a hash prefix of at least 7 digits of a commit."""
    try:
        return find_note(config, snapshot, name)
    except QueryError as missing:
        if "documents" not in snapshot.table_names():
            raise
        wanted = name.strip().strip("<>")
        rows = snapshot.cursor().execute(
            "SELECT doc_key, source, path FROM documents "
            "WHERE doc_key = $1 OR list_contains(names, lower($1)) "
            "OR (length($1) >= 7 AND regexp_full_match(lower($1), '[0-9a-f]+') "
            "AND len(list_filter(names, n -> starts_with(n, lower($1)))) > 0) "
            "ORDER BY doc_key", [wanted]).fetchall()
        if len(rows) > 1:
            raise QueryError(f"'{shown(name)}' names several documents: "
                             + ", ".join(key for key, _, _ in rows) + "; give the key") from None
        if not rows:
            raise missing from None
        return rows[0]
