"""Finding the document a person names: a note by path or title, a ticket by key, a commit
by a hash prefix, a mail thread or a Confluence page by its key, in the published tables."""

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
    if vault in config.vaults and rest:
        candidates |= {rest, rest + ".md"}
    rows = snapshot.cursor().execute(
        "SELECT note_key, source, path FROM notes "
        f"WHERE path IN ({sql_strings(sorted(candidates))}) "
        "OR lower(title) = lower(?) ORDER BY source, path", [wanted]).fetchall()
    if vault in config.vaults and rest:
        rows = [row for row in rows if row[1] == vault] or rows
    if not rows:
        raise NoteNotFound(f"Note not found: '{shown(note)}'")
    if len(rows) > 1:
        places = ", ".join(f"{source}/{path}" for _, source, path in rows)
        raise QueryError(f"'{shown(note)}' names several notes: {places}; give the path")
    return rows[0]


def find_document(config: JarvisConfig, snapshot: Snapshot, name: str) -> tuple[str, str, str]:
    """(node key, source, path) of a note (as ``find_note``), else of a ticket by key
    ('LUM-4', 'lumen#7'), a commit by a hash prefix of at least 7 digits, or a thread or page
    by its key ('thread:lumen-mail/<Message-ID>', 'page:lumen-wiki/65541')."""
    try:
        return find_note(config, snapshot, name)
    except QueryError as missing:
        wanted = name.strip()
        rows = snapshot.cursor().execute(
            "SELECT node_key, source, coalesce(json_extract_string(properties, '$.path'), "
            "'commits/' || json_extract_string(properties, '$.sha')) FROM graph_nodes "
            "WHERE (type = 'ticket' AND lower(node_key) = lower('ticket:' || $1)) "
            "OR (type = 'commit' AND length($1) >= 7 "
            "AND starts_with(json_extract_string(properties, '$.sha'), lower($1))) "
            "OR (type IN ('thread', 'page') AND node_key = $1) "
            "ORDER BY node_key", [wanted]).fetchall()
        if len(rows) > 1:
            raise QueryError(f"'{shown(name)}' names several commits or tickets: "
                             + ", ".join(key for key, _, _ in rows)) from None
        if not rows:
            raise missing
        return rows[0]
