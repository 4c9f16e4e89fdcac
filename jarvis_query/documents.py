"""Opening any document a search can return (read-note, `jarvis read`): a note, commit,
repository doc, ticket, mail thread or Confluence page, named by a hit's ``path`` and
``vault`` (its source) or by a bare identifier (lookup.py), in one shape for every kind.

What is particular to a kind is its descriptor's (jarvis_core/sources/kind.py): each
``DocumentType`` says the ``details`` its serving tables hold (a ticket's facts and links, a
commit's files with their +/- lines, a thread's messages) and whether its documents are
files read as they are now (``from_file``: a note, reading.py). Any other document's text
is what was indexed, rebuilt from the published chunks: each chunk is the document's
``[char_start:char_end]`` slice, laid at its place with overlaps trimmed; the chunker drops
only the whitespace between blocks, restored as line breaks. Nothing outside a configured
source is read, and a name that tries to lead out of one is refused whatever its kind.
"""

from __future__ import annotations

from datetime import date, datetime
from functools import cache

from jarvis_core.config import JarvisConfig
from jarvis_core.sources import registry
from jarvis_core.sources.kind import DocumentType
from jarvis_query import reading
from jarvis_query.lookup import DocumentNotFound, Found, find_document
from jarvis_query.snapshot import Snapshot
from jarvis_query.validation import check_source, shown

# The document's own fields a kind's facts may give; every other fact is a detail.
_OWN_FACTS = ("created_at", "warnings")


@cache
def _types() -> dict[str, DocumentType]:
    return {document.name: document for kind in registry.kinds() for document in kind.documents}


def _file_sources(config: JarvisConfig, source: str | None) -> list[str]:
    """The sources (``source`` only, when given) whose documents are files read from disk."""
    return [name for name in config.source_names if source in (None, name)
            and any(document.from_file for document in config.kind_of(name).documents)]


def read_document(config: JarvisConfig, snapshot: Snapshot | None, name: str,
                  source: str | None = None) -> dict:
    """The document ``name`` names in ``source`` (any configured source when None): the
    published document it names, else a note on disk (one created since the last publish,
    or any before the first)."""
    reading.refuse_escapes(name)
    check_source(config, source)
    missing = None
    if snapshot is not None:
        try:
            found = find_document(config, snapshot, name, source)
        except DocumentNotFound as exc:
            missing = exc
        else:
            return _open(config, snapshot, found)
    on_disk = reading.locate(config, _file_sources(config, source), name)
    if on_disk is not None:
        return _from_file(config, snapshot, *on_disk, named=None)
    if missing is not None:
        raise missing
    where = f"'{shown(source)}'" if source is not None else "any vault"
    raise DocumentNotFound(f"'{shown(name)}' names no note on disk in {where}, and nothing "
                           "else is published yet")


def _open(config: JarvisConfig, snapshot: Snapshot, found: Found) -> dict:
    document = _types()[found.source_type]
    if not document.from_file:
        return _from_tables(snapshot, found, document)
    located = reading.locate(config, [found.source], found.path)
    if located is None:
        raise reading.NoteAccessError(f"File not found: '{shown(found.path)}' is published "
                                      f"but no longer in '{found.source}'")
    return _from_file(config, snapshot, *located, named=found.named)


def _document(*, kind: str, source: str, path: str, key: str, title: str, created_at,
              modified_at, tags: list[str], content: str, published: bool, links, backlinks,
              details: dict, warnings: list[str], named: str | None) -> dict:
    """The one shape every kind is read in (dates as ISO text)."""
    return _plain({"kind": kind, "vault": source, "path": path, "key": key, "title": title,
                   "created_at": created_at, "modified_at": modified_at, "tags": tags,
                   "named": named, "details": details, "warnings": warnings,
                   "published": published, "links": links, "backlinks": backlinks,
                   "content": content})


def _plain(value):
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _from_file(config: JarvisConfig, snapshot: Snapshot | None, source: str, relative: str,
               real, named: str | None) -> dict:
    """A note as it is on disk, with its links and backlinks in the published graph
    (``snapshot``; None before any publish)."""
    note = reading.read_note_file(config, source, relative, real)
    kind = next(document.name for document in config.kind_of(source).documents
                if document.from_file)
    published, links, backlinks = False, None, None
    if snapshot is not None:
        published = snapshot.cursor().execute(
            "SELECT count(*) FROM documents WHERE doc_key = ?", [note.key]).fetchone()[0] > 0
        links, backlinks = _neighbours(snapshot, note.key)
    return _document(kind=kind, source=source, path=relative, key=note.key,
                     title=note.title, created_at=None, modified_at=note.modified_at,
                     tags=note.tags, content=note.text, published=published, links=links,
                     backlinks=backlinks, details=note.details, warnings=note.warnings,
                     named=named)


def _rows(snapshot: Snapshot, sql: str, found: Found) -> list[dict]:
    cursor = snapshot.cursor().execute(sql, [found.source, found.path])
    columns = [column[0] for column in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _from_tables(snapshot: Snapshot, found: Found, document: DocumentType) -> dict:
    """A published document: its details, its text rebuilt from its chunks, its links."""
    title, modified_at, tags = snapshot.cursor().execute(
        "SELECT title, modified_at, tags FROM documents WHERE source = ? AND doc_key = ?",
        [found.source, found.key]).fetchone()
    facts = (_rows(snapshot, document.details.facts, found) or [{}])[0] \
        if document.details.facts else {}
    own = {field: facts.pop(field, None) for field in _OWN_FACTS}
    details = {**facts, **{name: _rows(snapshot, sql, found)
                           for name, sql in document.details.lists.items()}}
    links, backlinks = _neighbours(snapshot, found.key)
    return _document(kind=found.source_type, source=found.source, path=found.path,
                     key=found.key, title=title, created_at=own["created_at"],
                     modified_at=modified_at, tags=tags or [],
                     content=document_text(snapshot, found.key), published=True, links=links,
                     backlinks=backlinks, details=details, warnings=own["warnings"] or [],
                     named=found.named)


def document_text(snapshot: Snapshot, doc_key: str) -> str:
    """The document rebuilt from its published chunks (see the module's docstring)."""
    parts: list[str] = []
    end = 0
    for start, stop, text in snapshot.cursor().execute(
            "SELECT char_start, char_end, text FROM chunks WHERE doc_key = ? "
            "ORDER BY char_start, position", [doc_key]).fetchall():
        if start > end:
            parts.append("\n" * min(start - end, 2))
        if stop > end:
            parts.append(text[max(0, end - start):])
            end = stop
    return "".join(parts)


def _neighbours(snapshot: Snapshot, key: str) -> tuple[list[dict], list[dict]]:
    """What the document points at and what points at it in the published graph: any node
    (people, tags, tickets, commits, notes, pages, threads) with the relations involved, and
    the source and path of those that are documents, to open them by."""
    rows = snapshot.cursor().execute(
        "WITH near AS (SELECT e.src = $1 AS outgoing, "
        "  CASE WHEN e.src = $1 THEN e.dst ELSE e.src END AS other, e.relation "
        "  FROM graph_edges e WHERE (e.src = $1 OR e.dst = $1) AND e.src <> e.dst) "
        "SELECT outgoing, other, any_value(n.type), any_value(n.title), "
        "list(DISTINCT relation ORDER BY relation), any_value(d.source), any_value(d.path) "
        "FROM near LEFT JOIN graph_nodes n ON n.node_key = other "
        "LEFT JOIN documents d ON d.doc_key = other GROUP BY outgoing, other ORDER BY other",
        [key]).fetchall()
    links: list[dict] = []
    backlinks: list[dict] = []
    for outgoing, other, node_type, title, relations, source, path in rows:
        entry = {"key": other, "type": node_type, "title": title, "relations": relations,
                 "vault": source, "path": path}
        (links if outgoing else backlinks).append(entry)
    return links, backlinks
