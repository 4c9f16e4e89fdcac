"""The knowledge graph of one vault, extracted from its stored ``notes`` and ``chunks`` rows.

Pure Python over table rows, so the Dagster asset only reads, calls and writes. Links
resolve as Obsidian resolves them (exact path, path suffix, file name; then, beyond
Obsidian, a unique alias), case-insensitively, NFC-normalised and with whitespace
collapsed. A target that matches nothing becomes a ``BrokenLink`` and never a node; one
that several notes share leads where Obsidian leads (``LinkResolver.resolve``), with an
``inferred`` edge of the same kind to each of the others. Every edge carries the chunks
and the line it was read from, and every note gets a fingerprint of all it produced, so the
caller rewrites only origins that changed."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from urllib.parse import urlsplit

from jarvis_core.settings import GraphSettings
from jarvis_core.sources.code_references import LINE, SYMBOL
from jarvis_core.sources.extraction import (
    BrokenLink,
    DocumentBatches,
    GraphExtractor,
    Mention,
    SourceGraph,
)
from jarvis_core.sources.references import (
    COMMIT,
    GITHUB,
    JIRA,
    MESSAGE,
    PAGE,
    GraphReference,
    find_references,
)
from jarvis_core.sources.vault.links import LinkResolver, canonical_url, relative_link_path
from jarvis_core.sources.vault.markdown import new_markdown_parser
from jarvis_core.sources.vault.note_text import NoteText, Occurrence
from jarvis_core.stores.graph.elements import EXPLICIT, INFERRED, Edge, Node

DEFAULT_RELATION_FIELDS = ("related", "up", "parent", "down", "next", "prev", "source", "author")


# Holds typed relations ("DEPENDS_ON [[X]]"): they become typed edges, not plain links.
_RELATIONSHIPS_FIELD = "relationships"


def _relation_name(field_name: str) -> str:
    return re.sub(r"\W+", "_", field_name).strip("_").upper()


def _iso(value: object) -> str | None:
    if isinstance(value, date):  # datetime is a date too
        return value.isoformat()
    return str(value) if value else None


@dataclass
class _GraphBuilder:
    vault: str
    resolver: LinkResolver
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: dict[tuple[str, str, str, str, str], list[Occurrence]] = field(default_factory=dict)
    explicit: set[tuple[str, str, str, str, str]] = field(default_factory=set)
    broken: set[BrokenLink] = field(default_factory=set)
    mentions: set[Mention] = field(default_factory=set)
    references: set[GraphReference] = field(default_factory=set)

    def add_edge(self, src: str, relation: str, dst: str, extractor: str, origin: str,
                 occurrence: Occurrence, confidence: str = EXPLICIT) -> None:
        """An edge is explicit when any of its occurrences is."""
        key = (src, relation, dst, extractor, origin)
        self.edges.setdefault(key, []).append(occurrence)
        if confidence == EXPLICIT:
            self.explicit.add(key)

    def mention(self, occurrence: Occurrence, node: str, origin: str) -> None:
        for chunk_id in occurrence.evidence:
            self.mentions.add(Mention(chunk_id, node, origin, self.vault))

    def target_node(self, candidates: tuple[str, ...], origin: str, target: str,
                    occurrence: Occurrence) -> str | None:
        """The node a link leads to (the first of ``LinkResolver.resolve``'s candidates),
        or None: a broken link is recorded, and a link to the note itself (``[[#Heading]]``,
        ``[[Self]]``) leads nowhere."""
        if not candidates:
            self.broken.add(BrokenLink(origin, self.vault, target, "unresolved", (),
                                       occurrence.line, occurrence.evidence))
            return None
        if candidates[0] == origin:
            return None
        for candidate in candidates:
            if candidate.startswith("file:"):
                path = self.resolver.paths[candidate]
                self.nodes[candidate] = Node(candidate, "file", posixpath.basename(path),
                                             self.vault, {"path": path})
        return candidates[0]

    def link(self, candidates: tuple[str, ...], origin: str, target: str, relation: str,
             extractor: str, occurrence: Occurrence) -> str | None:
        """The edge to the node a link leads to, and an inferred one to each other note of
        a shared name; that node, or None."""
        node = self.target_node(candidates, origin, target, occurrence)
        if node:
            self.add_edge(origin, relation, node, extractor, origin, occurrence)
            self.mention(occurrence, node, origin)
            for other in candidates[1:]:
                if other != origin:
                    self.add_edge(origin, relation, other, extractor, origin, occurrence,
                                  INFERRED)
        return node

    def tag(self, tag: str, origin: str, occurrence: Occurrence) -> None:
        """TAGGED note->tag, and CHILD_OF up the nesting ('a/b/c' -> 'a/b' -> 'a')."""
        self.nodes[f"tag:{tag}"] = Node(f"tag:{tag}", "tag", tag, None)
        self.add_edge(origin, "TAGGED", f"tag:{tag}", "tag", origin, occurrence)
        self.mention(occurrence, f"tag:{tag}", origin)
        child = tag
        while parent := child.rpartition("/")[0].rstrip("/"):
            self.nodes[f"tag:{parent}"] = Node(f"tag:{parent}", "tag", parent, None)
            self.add_edge(f"tag:{child}", "CHILD_OF", f"tag:{parent}", "tag", origin, occurrence)
            child = parent

    def url(self, url: str, origin: str, occurrence: Occurrence) -> None:
        canonical = canonical_url(url)
        if canonical is None:
            return
        key = f"link:{canonical}"
        self.nodes[key] = Node(key, "link", canonical, None,
                               {"url": canonical, "host": urlsplit(canonical).hostname})
        self.add_edge(origin, "REFERENCES", key, "url", origin, occurrence)
        self.mention(occurrence, key, origin)

    def finished_edges(self) -> list[Edge]:
        edges = []
        for key, occurrences in self.edges.items():
            src, relation, dst, extractor, origin = key
            shown = min(occurrences, key=lambda o: (not o.evidence, o.line))
            evidence = tuple(sorted({c for o in occurrences for c in o.evidence}))
            confidence = EXPLICIT if key in self.explicit else INFERRED
            edges.append(Edge(src, dst, relation, confidence, extractor, origin, self.vault,
                              evidence, shown.text))
        return sorted(edges, key=lambda e: (e.src, e.relation, e.dst, e.extractor, e.origin))


def _note_node(vault: str, row: dict) -> Node:
    properties = {"path": row["path"], "aliases": list(row.get("aliases") or []),
                  "tags": list(row.get("tags") or [])}
    for name, column in (("created", "created_at"), ("modified", "modified_at")):
        if value := _iso(row.get(column)):
            properties[name] = value
    return Node(row["note_key"], "note", row["title"], vault, properties)


def _extract_note(builder: _GraphBuilder, row: dict, text: NoteText,
                  relation_fields: Collection[str]) -> None:
    frontmatter_lines = _wikilinks(builder, row, text)
    _markdown_links(builder, row, text)
    _frontmatter_links(builder, row, text, relation_fields, frontmatter_lines)
    _typed_relations(builder, row, text)
    _tags(builder, row, text)


def _wikilinks(builder: _GraphBuilder, row: dict, text: NoteText) -> dict[str, int]:
    """Body wikilinks and embeds; returns the line of each frontmatter target, which the
    frontmatter pass needs for its broken links."""
    origin, resolver = row["note_key"], builder.resolver
    frontmatter_lines: dict[str, int] = {}
    for link in sorted([*(row.get("wikilinks") or []), *(row.get("embeds") or [])],
                       key=lambda link: (link["line"], link["target"], link["embed"])):
        if not text.in_body(link["line"]):
            frontmatter_lines.setdefault(link["target"], link["line"])
            continue
        if not link["target"]:
            continue  # [[#Heading]] / [[#^block]] point into the note itself
        occurrence = text.wikilink_occurrence(link["line"], link["target"])
        relation, extractor = ("EMBEDS", "embed") if link["embed"] else ("LINKS_TO", "wikilink")
        builder.link(resolver.resolve(link["target"], row["path"]), origin, link["target"],
                     relation, extractor, occurrence)
    return frontmatter_lines


def _markdown_links(builder: _GraphBuilder, row: dict, text: NoteText) -> None:
    """http(s) URLs become link nodes; relative paths resolve like wikilinks."""
    origin = row["note_key"]
    for link in sorted(row.get("links") or [], key=lambda link: (link["line"], link["url"])):
        occurrence = text.body_occurrence(link["line"], re.compile(re.escape(link["url"])),
                                          link["url"])
        if canonical_url(link["url"]):
            builder.url(link["url"], origin, occurrence)
            continue
        path = relative_link_path(link["url"])
        if path is None:
            continue
        candidates = builder.resolver.resolve_relative(path, row["path"])
        if not candidates and not path.lower().endswith(".md"):
            continue  # a relative link to a file outside the vault is not a note link
        builder.link(candidates, origin, link["url"], "EMBEDS" if link["image"] else "LINKS_TO",
                     "markdown_link", occurrence)


def _frontmatter_links(builder: _GraphBuilder, row: dict, text: NoteText,
                       relation_fields: Collection[str], lines: dict[str, int]) -> None:
    """A relation field names the edge (``up:`` -> UP); other link fields are LINKS_TO."""
    origin = row["note_key"]
    frontmatter_links = json.loads(row.get("frontmatter_links") or "{}")
    for key, targets in sorted(frontmatter_links.items()):
        for target in targets:
            occurrence = text.frontmatter_occurrence(
                key, lines.get(target, text.body_start_line - 1), target)
            candidates = builder.resolver.resolve(target, row["path"])
            if key == _RELATIONSHIPS_FIELD and key not in relation_fields:
                builder.target_node(candidates, origin, target, occurrence)  # broken or not
                continue
            relation = _relation_name(key) if key in relation_fields else "LINKS_TO"
            builder.link(candidates, origin, target, relation, "frontmatter", occurrence)


def _typed_relations(builder: _GraphBuilder, row: dict, text: NoteText) -> None:
    """``[[A]]|REL|[[B]]`` and ``relationships:``; "" on either side is the note itself."""
    origin = row["note_key"]
    for relation in sorted(row.get("relations") or [],
                           key=lambda r: (r["line"], r["relation"], r["subject"], r["object"])):
        sides = []
        for side in (relation["subject"], relation["object"]):
            candidates = builder.resolver.resolve(side, row["path"]) if side else (origin,)
            sides.append(candidates[0] if candidates else None)
        # an unresolved side was already reported as a broken link by its wikilink
        if None in sides or sides[0] == sides[1]:
            continue
        if relation["line"] and text.in_body(relation["line"]):
            occurrence = text.body_occurrence(
                relation["line"], re.compile(re.escape(relation["relation"]), re.IGNORECASE),
                relation["relation"])
        else:
            occurrence = text.frontmatter_occurrence(_RELATIONSHIPS_FIELD, relation["line"],
                                                     relation["relation"])
        builder.add_edge(sides[0], relation["relation"].upper(), sides[1], "typed_relation",
                         origin, occurrence)


def _tags(builder: _GraphBuilder, row: dict, text: NoteText) -> None:
    for entry in sorted(row.get("tag_lines") or [], key=lambda entry: entry["tag"]):
        for line in entry["lines"]:
            if text.in_body(line):
                occurrence = text.tag_occurrence(line, entry["tag"])
            else:
                occurrence = text.frontmatter_occurrence(
                    text.frontmatter_tag_field(entry["tag"]), line, entry["tag"])
            builder.tag(entry["tag"], row["note_key"], occurrence)


@cache
def _block_parser():
    """Block structure only: code blocks need no inline parsing (4x faster on link-dense
    notes)."""
    return new_markdown_parser().disable("inline")


def _code_lines(body: str) -> set[int]:
    """1-based body lines inside fenced or indented code blocks."""
    return {line + 1 for token in _block_parser().parse(body)
            if token.type in ("fence", "code_block") and token.map
            for line in range(*token.map)}


def _references(builder: _GraphBuilder, row: dict, text: NoteText) -> None:
    """Tickets, commits, mail messages, pages and code symbols the body cites outside code
    blocks, for cross_source_links to resolve in whichever source holds them (their lines
    count the whole file)."""
    found = [ref for ref in find_references(text.body)
             if ref.kind in (JIRA, GITHUB, COMMIT, MESSAGE, PAGE, SYMBOL, LINE)]
    code = _code_lines(text.body) if found else set()
    for ref in found:
        if ref.line not in code:
            builder.references.add(GraphReference(
                builder.vault, row["note_key"], row["note_key"], ref.relation, ref.kind,
                ref.target, ref.written, text.body_start_line + ref.line - 1,
                text.chunks_holding(ref.start, ref.end), text.line_excerpt(ref.start)))




def extract_vault_graph(
    source: str,
    notes: list[dict],
    chunks: list[dict],
    *,
    attachments: Collection[str] = frozenset(),
    relation_fields: tuple[str, ...] = DEFAULT_RELATION_FIELDS,
    every_note: Iterable[dict] | None = None,
) -> SourceGraph:
    """The graph of one vault from its ``notes`` rows, ``chunks`` rows (chunk_id, path,
    char_start, char_end) and attachment paths, in a deterministic order. Given a batch of
    the vault's notes, ``every_note`` are the whole vault's (path, aliases) rows links
    resolve against; by default, ``notes``."""
    rows = sorted(notes, key=lambda row: row["path"])
    directory = rows if every_note is None else sorted(every_note, key=lambda row: row["path"])
    resolver = LinkResolver(source, (row["path"] for row in directory),
                            {row["path"]: row.get("aliases") or [] for row in directory},
                            attachments)
    chunks_by_path: dict[str, list[dict]] = {}
    for chunk in chunks:
        chunks_by_path.setdefault(chunk["path"], []).append(chunk)
    builder = _GraphBuilder(source, resolver)
    fields = set(relation_fields)
    for row in rows:
        builder.nodes[row["note_key"]] = _note_node(source, row)
        note_text = NoteText(row, chunks_by_path.get(row["path"], []))
        _extract_note(builder, row, note_text, fields)
        _references(builder, row, note_text)

    edges = builder.finished_edges()
    broken = sorted(builder.broken, key=lambda b: (b.origin, b.line, b.target, b.candidates))
    mentions = sorted(builder.mentions, key=lambda m: (m.chunk_id, m.node_key))
    references = sorted(builder.references,
                        key=lambda r: (r.origin, r.line, r.kind, r.target, r.written))
    return SourceGraph.assemble(builder.nodes, (row["note_key"] for row in rows), edges,
                                broken, mentions, references)


def _extract(source: str, settings, graph: GraphSettings, rows: dict[str, list[dict]],
             chunk_rows: list[dict]) -> SourceGraph:
    return extract_vault_graph(source, rows["notes"], chunk_rows,
                               attachments={row["path"] for row in rows["attachments"]},
                               relation_fields=graph.relation_fields,
                               every_note=rows["every_note"])


# What links resolve against (every note's path and aliases, the attachments), read once; the
# notes themselves, with their bodies, a batch at a time.
EXTRACTOR = GraphExtractor(
    {"every_note": "SELECT path, aliases FROM notes WHERE source = ?",
     "attachments": "SELECT path FROM attachments WHERE source = ?"},
    _extract,
    DocumentBatches(
        "notes", "SELECT path, note_key, title, aliases, tags, tag_lines, wikilinks, embeds, "
                 "links, relations, frontmatter_links, body, body_start_line, frontmatter, "
                 "created_at, modified_at FROM notes WHERE source = ?", "path",
        lambda source, row: row["note_key"]))
