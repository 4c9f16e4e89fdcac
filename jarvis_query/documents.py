"""Reading a mail thread or a Confluence page: read-note's counterpart for the sources whose
documents are not files of their own.

A thread is named by its key (``thread:<source>/<id>``), its path (``threads/<id>``), its id or
any Message-ID in it (``<…>`` and ``mid:`` optional); a page by its key
(``page:<source>/<id>``), its path (``pages/<id>``), its id or its title. Only sources
configured now (``mail`` and ``confluence``) are read, whatever the published version still
holds. The published tables keep no bodies, so the text is rebuilt from the published chunks:
each chunk is the document's ``[char_start:char_end]`` slice, laid at its place with overlaps
trimmed; the chunker drops only the whitespace between blocks, restored as line breaks. No
file is opened: a thread is the messages of several files, collapsed, and the chunks are
exactly what search found.
"""

from __future__ import annotations

from dataclasses import dataclass

from jarvis_core.config import JarvisConfig
from jarvis_query.snapshot import Snapshot
from jarvis_query.validation import QueryError, shown

THREAD, PAGE = "thread", "page"
# document kind -> (source kind, key prefix, path prefix)
_KINDS = {THREAD: ("mail", "thread:", "threads/"), PAGE: ("confluence", "page:", "pages/")}
_TABLES = {THREAD: "mail_threads", PAGE: "pages"}


@dataclass(frozen=True)
class DocumentRef:
    kind: str
    source: str
    doc_id: str
    message_id: str | None = None  # the Message-ID it was named by, when not the first one

    @property
    def key(self) -> str:
        return f"{_KINDS[self.kind][1]}{self.source}/{self.doc_id}"

    @property
    def path(self) -> str:
        return f"{_KINDS[self.kind][2]}{self.doc_id}"


def has_documents(config: JarvisConfig) -> bool:
    return bool(config.sources_of("mail") or config.sources_of("confluence"))


def _sources(config: JarvisConfig, kind: str, source: str | None) -> list[str]:
    configured = sorted(config.sources_of("mail" if kind == THREAD else "confluence"))
    return [name for name in configured if source in (None, name)]


def _explicit(config: JarvisConfig, name: str, source: str | None) -> DocumentRef | None:
    """A ``thread:`` or ``page:`` key, refused when its source is not configured."""
    for kind, (source_kind, prefix, _) in _KINDS.items():
        if name.startswith(prefix):
            named, _, doc_id = name.removeprefix(prefix).partition("/")
            if config.source_kind(named) != source_kind or not doc_id:
                raise QueryError(f"'{shown(name)}' names no configured {source_kind} source")
            if source not in (None, named):
                raise QueryError(f"'{shown(name)}' is not in '{shown(source)}'")
            return DocumentRef(kind, named, doc_id)
    return None


def find_document(config: JarvisConfig, snapshot: Snapshot, name: str,
                  source: str | None = None) -> DocumentRef | None:
    """The thread or page ``name`` names in the configured mail and Confluence sources (only
    ``source`` when given); None when it names none; QueryError when it names several."""
    wanted = name.strip()
    ref = _explicit(config, wanted, source)
    if ref is not None:
        return ref if _exists(snapshot, ref) else None
    tables = snapshot.table_names()
    found: list[DocumentRef] = []
    cursor = snapshot.cursor()
    mail = _sources(config, THREAD, source) if "mail_threads" in tables else []
    if mail:
        message = wanted.removeprefix("threads/").removeprefix("mid:").strip("<>")
        for src, thread_id, first in cursor.execute(
                "SELECT source, thread_id, message_ids[1] FROM mail_threads "
                "WHERE source IN (SELECT unnest($1)) "
                "AND (thread_id = $2 OR list_contains(message_ids, $2)) ORDER BY ALL",
                [mail, message]).fetchall():
            found.append(DocumentRef(THREAD, src, thread_id,
                                     message if message not in (thread_id, first) else None))
    spaces = _sources(config, PAGE, source) if "pages" in tables else []
    if spaces:
        page = wanted.removeprefix("pages/")
        found += [DocumentRef(PAGE, src, page_id) for src, page_id in cursor.execute(
            "SELECT source, page_id FROM pages WHERE source IN (SELECT unnest($1)) "
            "AND (page_id = $2 OR lower(title) = lower($2)) ORDER BY ALL",
            [spaces, page]).fetchall()]
    if len(found) > 1:
        raise QueryError(f"'{shown(name)}' names several documents: "
                         + ", ".join(ref.key for ref in found) + "; give the key")
    return found[0] if found else None


def _exists(snapshot: Snapshot, ref: DocumentRef) -> bool:
    table = _TABLES[ref.kind]
    if table not in snapshot.table_names():
        return False
    column = "thread_id" if ref.kind == THREAD else "page_id"
    return snapshot.cursor().execute(
        f"SELECT count(*) FROM {table} WHERE source = ? AND {column} = ?",
        [ref.source, ref.doc_id]).fetchone()[0] > 0


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
    (people, tickets, commits, notes, pages, threads), with the relations involved."""
    rows = snapshot.cursor().execute(
        "SELECT e.src = $1 AS outgoing, CASE WHEN e.src = $1 THEN e.dst ELSE e.src END AS other, "
        "any_value(n.type), any_value(n.title), list(DISTINCT e.relation ORDER BY e.relation) "
        "FROM graph_edges e LEFT JOIN graph_nodes n "
        "ON n.node_key = CASE WHEN e.src = $1 THEN e.dst ELSE e.src END "
        "WHERE (e.src = $1 OR e.dst = $1) AND e.src <> e.dst GROUP BY ALL ORDER BY other",
        [key]).fetchall()
    links: list[dict] = []
    backlinks: list[dict] = []
    for outgoing, other, node_type, title, relations in rows:
        entry = {"key": other, "type": node_type, "title": title, "relations": relations}
        (links if outgoing else backlinks).append(entry)
    return links, backlinks


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def _person(value: dict | None) -> str | None:
    if not value:
        return None
    name, email = value.get("name"), value.get("email")
    return f"{name} <{email}>" if name and email else name or email


def _thread(snapshot: Snapshot, ref: DocumentRef) -> dict:
    cursor = snapshot.cursor()
    subject, participants, started, last = cursor.execute(
        "SELECT subject, participants, started_at, last_at FROM mail_threads "
        "WHERE source = ? AND thread_id = ?", [ref.source, ref.doc_id]).fetchone()
    messages = [
        {"message_id": message_id, "sent_at": _iso(sent_at), "from": _person(sender),
         "to": [_person(p) for p in recipients or []], "cc": [_person(p) for p in cc or []],
         "subject": message_subject,
         "attachments": [{"name": a["filename"], "type": a["content_type"], "size": a["size"]}
                         for a in attachments or []],
         "warnings": warnings or []}
        for message_id, sent_at, sender, recipients, cc, message_subject, attachments, warnings
        in cursor.execute(
            "SELECT message_id, sent_at, sender, recipients, cc, subject, attachments, warnings "
            "FROM mail_messages WHERE source = ? AND thread_id = ? ORDER BY sent_at, message_id",
            [ref.source, ref.doc_id]).fetchall()]
    return {"title": subject or "(no subject)", "started_at": _iso(started),
            "modified_at": _iso(last),
            "participants": [_person(p) for p in participants or []],
            "selected_message": ref.message_id, "messages": messages}


def _page(snapshot: Snapshot, ref: DocumentRef) -> dict:
    row = snapshot.cursor().execute(
        "SELECT title, space, ancestors, author, editor, created_at, updated_at, version, "
        "labels, url, attachments, warnings FROM pages WHERE source = ? AND page_id = ?",
        [ref.source, ref.doc_id]).fetchone()
    (title, space, ancestors, author, editor, created, updated, version, labels, url,
     attachments, warnings) = row
    return {"title": title, "space": space,
            "ancestors": [a["title"] for a in ancestors or []],
            "author": _person(author), "editor": _person(editor),
            "created_at": _iso(created), "modified_at": _iso(updated), "version": version,
            "labels": labels or [], "url": url,
            "attachments": [{"name": a["name"], "type": a["media_type"], "size": a["size"]}
                            for a in attachments or []],
            "page_warnings": warnings or []}


def read_document(snapshot: Snapshot, ref: DocumentRef) -> dict:
    """The thread (its messages, participants) or page (space, ancestors, people, labels)
    with its text and its links and backlinks in the published graph."""
    details = _thread(snapshot, ref) if ref.kind == THREAD else _page(snapshot, ref)
    links, backlinks = _neighbours(snapshot, ref.key)
    return {"kind": ref.kind, "vault": ref.source, "path": ref.path, "key": ref.key,
            **details, "content": document_text(snapshot, ref.key), "published": True,
            "links": links, "backlinks": backlinks}
