"""The knowledge graph of one Confluence export, from its stored ``pages`` and their chunks.

A page is a document (``page:<source>/<page id>``: page ids are unique within a Confluence
site and the source name within Jarvis, while the space key is missing from some HTML
exports and changes when a page moves; the space is a property). Edges (origin: the page):

- ``page -PARENT-> page`` up the hierarchy (evidence: the parent's title on the facts
  line's ``Path:``), as ``commit -PARENT-> commit`` runs;
- ``page -LINKS_TO-> page`` for links to pages of the export, by id or by title (same
  space first, then a title unique in the export); a link to a page the export does not
  hold is a broken link and a reference, which another export holding it resolves;
- ``person -AUTHORED-> page`` (creator), ``page -EDITED_BY-> person`` (last editor) and
  ``page -MENTIONS-> person`` (``@mentions``), people folded across sources (a Confluence
  Cloud account id is the Jira user of the same account);
- ``page -TAGGED-> tag:<label>``, the tags notes and tickets share.

Jira keys (the Jira issue macro and prose keys), commits, GitHub issues, paths, notes and
mail messages cited outside code blocks are references for ``cross_source_links``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from jarvis_core.settings import GraphSettings
from jarvis_core.sources.collector import DocumentText, Evidence, GraphCollector
from jarvis_core.sources.export_rows import identity_of
from jarvis_core.sources.extraction import (
    OTHER_PEOPLE,
    DocumentBatches,
    GraphExtractor,
    SourceGraph,
    other_people,
)
from jarvis_core.sources.people import Identity, PersonDirectory
from jarvis_core.sources.references import (
    JIRA,
    PAGE,
    PAGE_TITLE,
    document_name,
    find_references,
)
from jarvis_core.stores.graph.elements import Node

PAGE_PREFIX = "page:"
_FENCE = re.compile(r"^\s*(```|~~~)")


def page_key(source: str, page_id: str) -> str:
    return f"{PAGE_PREFIX}{source}/{page_id}"


def page_path(page_id: str) -> str:
    """The page's document path within its source (chunks and search results show it)."""
    return f"pages/{page_id}"


def _node(source: str, page: dict) -> Node:
    properties = {name: page[column] for name, column in (
        ("page_id", "page_id"), ("space", "space"), ("kind", "kind"), ("version", "version"),
        ("url", "url"), ("labels", "labels"), ("parent_id", "parent_id"))
        if page[column] not in (None, [], "")}
    properties["path"] = page_path(page["page_id"])
    for name, column in (("created", "created_at"), ("updated", "updated_at")):
        if page[column]:
            properties[name] = page[column].isoformat()
    return Node(page_key(source, page["page_id"]), "page", page["title"], source, properties)


def _code_lines(text: str) -> set[int]:
    """1-based lines inside fenced code blocks (the body is markdown)."""
    lines, inside = set(), False
    for number, line in enumerate(text.split("\n"), 1):
        if _FENCE.match(line):
            inside = not inside
            lines.add(number)
        elif inside:
            lines.add(number)
    return lines


class _Pages:
    """The export's pages by id and by title, for links."""

    def __init__(self, pages: list[dict]) -> None:
        self.by_id = {row["page_id"]: row for row in pages}
        self.by_title: dict[tuple[str | None, str], str] = {}
        self.anywhere: dict[str, set[str]] = {}
        for row in pages:
            name = document_name(row["title"])
            self.by_title.setdefault((row["space"], name), row["page_id"])
            self.anywhere.setdefault(name, set()).add(row["page_id"])

    def resolve(self, page_id: str | None, title: str | None, space: str | None) -> str | None:
        if page_id in self.by_id:
            return page_id
        name = document_name(title)
        if not name:
            return None
        found = self.by_title.get((space, name))
        candidates = self.anywhere.get(name, set())
        return found or (next(iter(candidates)) if len(candidates) == 1 else None)


def _facts(graph: GraphCollector, key: str, page: dict, pages: _Pages,
           text: DocumentText) -> None:
    """PARENT, TAGGED, AUTHORED and EDITED_BY, with the facts line as their evidence."""
    facts_end = max(text.text.find("\n"), 0)
    first = text.at(0, facts_end)

    def on_facts(written: str) -> Evidence:
        return text.find(written, 0, facts_end) or first

    parent = pages.by_id.get(page["parent_id"])
    if parent is not None:
        graph.edge(key, "PARENT", page_key(graph.source, parent["page_id"]), "page_hierarchy",
                   key, on_facts(f"› {parent['title']}") if " › " in text.text[:facts_end]
                   else on_facts(f"Path: {parent['title']}"))
    for label in page["labels"] or ():
        if tag := graph.tag(label):
            graph.edge(key, "TAGGED", tag, "label", key, on_facts(label))
    author, editor = identity_of(page["author"]), identity_of(page["editor"])
    if person := graph.person(author):
        graph.edge(person, "AUTHORED", key, "page_history", key,
                   on_facts(f"Created: {author.name or author.email}"))
    if person := graph.person(editor):
        graph.edge(key, "EDITED_BY", person, "page_history", key,
                   on_facts(f"by {editor.name or editor.email}"))
    for identity in filter(None, map(identity_of, page["mentions"] or ())):
        if person := graph.person(identity):
            graph.edge(key, "MENTIONS", person, "mention", key,
                       text.find(f"@{identity.name or identity.email}") or first)


def _unshown(text: DocumentText, body: int, written: str) -> Evidence:
    """Evidence of a link whose words the text does not repeat (its link text differs from
    the title): the body's first chunk, and the link as the markup wrote it."""
    chunks, _, line = text.at(body + 1)
    return chunks, f"link: {written}", line


def _links(graph: GraphCollector, key: str, page: dict, pages: _Pages,
           text: DocumentText) -> None:
    """LINKS_TO the export's pages; broken links and references for the others."""
    body = max(text.text.find("\n"), 0)
    for link in page["links"] or ():
        target = pages.resolve(link["page_id"], link["title"], link["space"] or page["space"])
        shown = pages.by_id[target]["title"] if target else link["title"]
        evidence = next(filter(None, (text.find(written, body) for written in (
            shown, link["written"]))), None) or _unshown(text, body, link["written"])
        if target == page["page_id"]:
            continue
        if target:
            graph.edge(key, "LINKS_TO", page_key(graph.source, target), "page_link", key,
                       evidence)
            continue
        graph.broken_link(key, link["title"] or link["written"], evidence)
        kind, cited = (PAGE, link["page_id"]) if link["page_id"] else (PAGE_TITLE, link["title"])
        if cited:
            graph.cite(key, "LINKS_TO", kind, cited, link["written"], evidence)


def _references(graph: GraphCollector, key: str, page: dict, pages: _Pages,
                text: DocumentText) -> None:
    """What the text cites outside code; Jira macro keys the text does not show as well."""
    code = _code_lines(text.text)
    cited_keys = set()
    for ref in find_references(text.text, skip_lines={1} | code):
        evidence = text.at(ref.start, ref.end)
        if ref.kind in (PAGE, PAGE_TITLE):
            target = pages.resolve(ref.target if ref.kind == PAGE else None,
                                   ref.target if ref.kind == PAGE_TITLE else None, page["space"])
            if target:
                graph.edge(key, "LINKS_TO", page_key(graph.source, target), "reference", key,
                           evidence)
                continue
        cited_keys.add(ref.target)
        graph.cite(key, ref.relation, ref.kind, ref.target, ref.written, evidence)
    for jira_key in page["jira_keys"] or ():
        if jira_key not in cited_keys:
            graph.cite(key, "MENTIONS", JIRA, jira_key, jira_key,
                       text.find(jira_key) or text.at(0, max(text.text.find("\n"), 0)))


def extract_page_graph(source: str, pages: list[dict], chunks: list[dict],
                       known_people: Iterable[Identity] = (),
                       every_page: Iterable[dict] | None = None) -> SourceGraph:
    """The graph of one export from its ``pages`` rows and their chunks (chunk_id, doc_key,
    char_start, char_end), in a deterministic order; ``known_people`` are identities other
    sources recorded (Jira users with their account ids). Given a batch of the export,
    ``every_page`` are the whole export's rows of what resolves across pages
    (``_EVERY_PAGE``: ids, spaces, titles and people); by default, ``pages``."""
    directory = pages if every_page is None else list(every_page)
    identities = [identity for row in directory for identity in map(identity_of, (
        row["author"], row["editor"], *(row["mentions"] or ()))) if identity]
    graph = GraphCollector(source, PersonDirectory([*known_people, *identities]))
    index = _Pages(directory)
    chunks_by_doc: dict[str, list[dict]] = {}
    for chunk in chunks:
        chunks_by_doc.setdefault(chunk["doc_key"], []).append(chunk)
    for page in sorted(pages, key=lambda row: row["page_id"]):
        key = page_key(source, page["page_id"])
        graph.document(_node(source, page))
        text = DocumentText(page["text"], chunks_by_doc.get(key, []))
        _facts(graph, key, page, index, text)
        _links(graph, key, page, index, text)
        _references(graph, key, page, index, text)
    return graph.graph()


def _extract(source: str, settings, graph: GraphSettings, rows: dict[str, list[dict]],
             chunk_rows: list[dict]) -> SourceGraph:
    return extract_page_graph(source, rows["pages"], chunk_rows,
                              known_people=other_people(rows), every_page=rows["every_page"])


# What resolves across an export's pages (ids and titles for links, the people they name),
# read once; the pages themselves, with their texts, a batch at a time.
_EVERY_PAGE = ("SELECT page_id, space, title, author, editor, mentions FROM pages "
               "WHERE source = ? ORDER BY page_id")

EXTRACTOR = GraphExtractor(
    {"every_page": _EVERY_PAGE, "people": OTHER_PEOPLE},
    _extract,
    DocumentBatches(
        "pages", "SELECT * EXCLUDE (source, revision, file, item, warnings, content_hash, "
                 "parser_version, row_hash, ingested_at) FROM pages WHERE source = ?",
        "page_id", lambda source, row: page_key(source, row["page_id"])))
