"""Finding the document a person names, in the published ``documents`` table, whatever its
kind: its key, its path (a note's '.md' optional; with no source given, the source's name
may lead it), or a name its kind gives it (jarvis_core/sources/kind.py: a note's or page's
title, a ticket's key or owner/repo#12, a thread's Message-IDs, a commit's hash or a prefix
of at least 7 hex digits). Only the configured sources are searched (a profile's, when
scoped), whatever the published version still holds of others."""

from __future__ import annotations

from typing import NamedTuple

from jarvis_core.config import JarvisConfig
from jarvis_query.results import sql_strings
from jarvis_query.snapshot import Snapshot
from jarvis_query.validation import QueryError, shown

MIN_HASH_PREFIX = 7
# The documents a name may name, by the published ``document_names`` (every name a document
# answers to, lower-cased paths among them; indexed): its key, its path with and without
# '.md' (and its source), a name of its kind, or for a hash, names it starts. A lookup reads
# a handful of rows instead of every document's names (66,665 documents: a 16 ms scan;
# here 0.6 ms for the names, 1.2 ms for the documents they name).
_CANDIDATES = """
    SELECT doc_key FROM document_names WHERE name IN ($id, $path, $path || '.md')
    UNION SELECT doc_key FROM document_names
          WHERE $hash AND starts_with(name, $id)"""
# How a name matched, best first (the first kind of match that finds anything decides), of
# the documents ``keys`` lists (the name as given, bound, then the candidates' keys, inlined:
# an IN list of literals is looked up in the index, 0.6 ms; the keys unnested from a bound
# list, or any other condition on the table such as the sources, made it scan every
# document, 8-28 ms at 66,665 of them). The sources and the best kind are kept after.
_MATCHES = """
    SELECT doc_key, source, path, source_type,
           CASE WHEN doc_key = $name THEN 0
                WHEN path IN ($name, $name || '.md')
                     OR (source = $head AND path IN ($rest, $rest || '.md')) THEN 1
                WHEN list_contains(names, $id) THEN 2
                WHEN length($id) >= $min_prefix AND regexp_full_match($id, '[0-9a-f]+')
                     AND len(list_filter(names, n -> starts_with(n, $id))) > 0 THEN 3
           END AS how,
           CASE WHEN how = 2 THEN $id
                WHEN how = 3 THEN list_filter(names, n -> starts_with(n, $id))[1] END AS named
    FROM documents WHERE doc_key IN ($name{keys}) AND how IS NOT NULL"""


class DocumentNotFound(QueryError):
    """No document in the sources asked for has the name."""


class Found(NamedTuple):
    """A document ``find_document`` found: its key, source, path and type, and the
    identifier it was named by (lower-cased; None when named by its key or path)."""

    key: str
    source: str
    path: str
    source_type: str
    named: str | None


def find_document(config: JarvisConfig, snapshot: Snapshot, name: str,
                  source: str | None = None) -> Found:
    """The one document ``name`` names in ``source`` (every configured source when None);
    DocumentNotFound when none, QueryError listing their keys when several."""
    wanted = name.strip()
    sources = [source] if source is not None else config.source_names
    head, _, rest = wanted.strip("/").partition("/")
    identifier = wanted.removeprefix("mid:").strip("<>").lower()
    cursor = snapshot.cursor()
    keys = [key for (key,) in cursor.execute(_CANDIDATES, {
        "id": identifier, "path": wanted.strip("/").lower(),
        "hash": len(identifier) >= MIN_HASH_PREFIX and all(
            character in "0123456789abcdef" for character in identifier)}).fetchall()]
    readable = {name for name in sources if name in config.source_names}
    rows = [row for row in cursor.execute(
        _MATCHES.format(keys=", " + sql_strings(keys) if keys else ""), {
            "name": wanted.strip("/"), "head": head if source is None and rest else None,
            "rest": rest, "id": identifier, "min_prefix": MIN_HASH_PREFIX}).fetchall()
            if row[1] in readable]
    best = min((row[4] for row in rows), default=None)
    rows = sorted(row for row in rows if row[4] == best)
    if not rows:
        where = f"'{shown(source)}'" if source is not None else "the sources you can read"
        raise DocumentNotFound(f"'{shown(name)}' names no document in {where}")
    if len(rows) > 1:
        raise QueryError(f"'{shown(name)}' names several documents: "
                         + ", ".join(row[0] for row in rows)
                         + "; give its key, or its path and vault")
    key, found_source, path, source_type, _, named = rows[0]
    return Found(key, found_source, path, source_type, named)
