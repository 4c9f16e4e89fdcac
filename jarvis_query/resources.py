"""Documents as MCP resources: ``jarvis://<source>/<path>`` (the path percent-encoded) for
every published document a profile may see, read as read-note reads them (notes as they are
on disk now, every other document as it was indexed). Listed a page at a time, in source
and path order."""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit

from jarvis_query.validation import QueryError, shown

SCHEME = "jarvis"
PAGE_SIZE = 500
_MIME = {"note": "text/markdown", "repo_doc": "text/markdown"}


class ResourceNotFound(QueryError):
    """No document a client may see has this URI."""


def document_uri(source: str, path: str) -> str:
    return f"{SCHEME}://{source}/{quote(path, safe='/')}"


def parse_uri(uri: str) -> tuple[str, str]:
    """(source, path) of a ``jarvis://`` URI."""
    parts = urlsplit(str(uri))
    path = unquote(parts.path.removeprefix("/"))
    if parts.scheme != SCHEME or not parts.netloc or not path or parts.query or parts.fragment:
        raise ResourceNotFound(f"not a document URI: '{shown(str(uri))}' (expected "
                               f"{SCHEME}://<source>/<path>)")
    return parts.netloc, path


def list_documents(kb, cursor: str | None = None, page_size: int = PAGE_SIZE
                   ) -> tuple[list[dict], str | None]:
    """One page of documents (uri, name, title, mime type) and the cursor of the next page
    (None after the last)."""
    if cursor is not None and not (cursor.isdigit() and len(cursor) < 12):
        raise QueryError(f"invalid cursor '{shown(cursor)}'", "cursor")
    offset = int(cursor or 0)
    sources = kb.config.source_names
    if not sources:
        return [], None
    snapshot = kb.snapshots.current()
    rows = snapshot.cursor().execute(
        "SELECT source, path, any_value(title), min(source_type) FROM ("
        "  SELECT source, path, title, 'note' AS source_type FROM notes"
        "  UNION ALL SELECT source, path, title, source_type FROM chunks) "
        "WHERE source IN (SELECT unnest($1)) GROUP BY source, path "
        "ORDER BY source, path LIMIT $2 OFFSET $3",
        [sources, page_size + 1, offset]).fetchall()
    documents = [{"uri": document_uri(source, path), "name": f"{source}/{path}",
                  "title": title or path, "source_type": source_type,
                  "mime_type": _MIME.get(source_type, "text/plain")}
                 for source, path, title, source_type in rows[:page_size]]
    return documents, str(offset + page_size) if len(rows) > page_size else None


def read_document(kb, uri: str) -> dict:
    """The document at ``uri``, opened as read-note opens a search hit's source and path
    (jarvis_query/documents.py): its text, title and mime type, for a source the client may
    see; ResourceNotFound otherwise (whether or not the document exists elsewhere)."""
    source, path = parse_uri(uri)
    if source not in kb.config.source_names:
        raise ResourceNotFound(f"no document at '{shown(str(uri))}'")
    document = kb.read_note(path, vault=source)
    return {"uri": document_uri(source, document["path"]), "source": source,
            "path": document["path"], "title": document["title"],
            "mime_type": _MIME.get(document["kind"], "text/plain"), "text": document["content"]}
