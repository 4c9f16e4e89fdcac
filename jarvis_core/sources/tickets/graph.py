"""The knowledge graph of one ticket set, extracted from its stored ``tickets`` and ``chunks``.

Each ticket is a node keyed by its source, like its document (``ticket:lumen-jira/LUM-4``,
``ticket:lumen-github/lumen#7``): the same key in two ticket sets (a project exported twice)
is two nodes, which ``cross_source`` links by SAME_AS. Its fields are properties; assignee,
reporter and commenters are person nodes (identities folded by ``jarvis_core.sources.people``);
labels are tags shared with notes; issue links become typed edges read in their outward
direction (``LUM-4 -BLOCKS-> LUM-6`` whichever side states it).
References in the text (tickets, commits, repository paths) and links to tickets outside
the set are returned as ``GraphReference`` for ``cross_source_links`` to resolve against
every source. Every edge cites the ticket's chunks holding the line it was read from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from jarvis_core.settings import GraphSettings
from jarvis_core.sources.extraction import DocumentBatches, GraphExtractor, Mention, SourceGraph
from jarvis_core.sources.people import Identity, PersonDirectory
from jarvis_core.sources.references import (
    GITHUB,
    JIRA,
    GraphReference,
    chunks_holding,
    find_references,
    github_aliases,
    line_text,
)
from jarvis_core.sources.tickets.fields import display_name
from jarvis_core.sources.tickets.github import github_repo_of
from jarvis_core.stores.graph.elements import EXPLICIT, Edge, Node

TICKET_PREFIX = "ticket:"
_PERSON_ROLES = (("assignee", "ASSIGNED_TO", "Assignee"), ("reporter", "REPORTED_BY", "Reporter"))


def ticket_key(source: str, key: str) -> str:
    """``ticket:<source>/<KEY>``: the ticket's document and node key."""
    return f"{TICKET_PREFIX}{source}/{key}"


def ticket_path(key: str) -> str:
    """The ticket's document path within its source (chunks and search results show it)."""
    return f"tickets/{key}"


def link_relation(phrase: str | None) -> str:
    """'blocks' -> BLOCKS, 'relates to' -> RELATES_TO, 'is child of' -> IS_CHILD_OF."""
    return re.sub(r"\W+", "_", phrase or "relates to").strip("_").upper() or "RELATES_TO"


def _identity(who: dict | None, system: str) -> Identity | None:
    if not who:
        return None
    account = who.get("account")
    return Identity(name=who.get("name") or (account if system == GITHUB else None),
                    email=who.get("email"),
                    aliases=(f"{system}:{account}",) if account else ())


def _node(source: str, ticket: dict) -> Node:
    properties = {name: ticket[name] for name in (
        "system", "number", "repo", "status", "type", "priority", "labels", "components",
        "fix_versions", "url", "is_pull_request") if ticket[name] not in (None, [], "")}
    properties["key"], properties["path"] = ticket["key"], ticket_path(ticket["key"])
    if ticket["system"] == GITHUB and ticket["url"]:
        properties["repo_full"] = github_repo_of({"html_url": ticket["url"]})
    for name, column in (("created", "created_at"), ("updated", "updated_at"),
                         ("resolved", "resolved_at")):
        if ticket[column]:
            properties[name] = ticket[column].isoformat()
    return Node(ticket_key(source, ticket["key"]), "ticket",
                f"{ticket['key']}: {ticket['summary']}", source, properties)


class _TicketText:
    """A ticket's document text with its chunks, for evidence."""

    def __init__(self, ticket: dict, chunks: Iterable[dict]) -> None:
        self.text: str = ticket["text"]
        self.chunks = sorted((c["char_start"], c["char_end"], c["chunk_id"]) for c in chunks)

    def evidence(self, start: int, end: int) -> tuple[tuple[str, ...], str]:
        return chunks_holding(self.chunks, start, end), line_text(self.text, start)

    def fact(self, written: str) -> tuple[tuple[str, ...], str]:
        """Evidence for a field shown on the facts line (the first line)."""
        first_line = self.text.split("\n", 1)[0]
        at = max(first_line.find(written), 0)
        return self.evidence(at, at + len(written))


def extract_ticket_graph(source: str, tickets: list[dict], chunks: list[dict],
                         every_ticket: Iterable[dict] | None = None) -> SourceGraph:
    """The graph of one ticket set from its ``tickets`` rows and their chunks (chunk_id,
    doc_key, char_start, char_end), in a deterministic order. Given a batch of the set,
    ``every_ticket`` are the whole set's rows, in key order, of what resolves across tickets
    (``_EVERY_TICKET``: keys, aliases and people); by default, ``tickets``."""
    rows = sorted(tickets, key=lambda row: row["key"])
    directory = rows if every_ticket is None else list(every_ticket)
    by_alias = {}
    for row in directory:
        if row["system"] == GITHUB:
            full = github_repo_of({"html_url": row["url"]}) if row["url"] else None
            for alias in github_aliases(row["repo"], full, row["number"]):
                by_alias[alias] = ticket_key(source, row["key"])
        else:
            by_alias[row["key"]] = ticket_key(source, row["key"])
    chunks_by_doc: dict[str, list[dict]] = {}
    for chunk in chunks:
        chunks_by_doc.setdefault(chunk["doc_key"], []).append(chunk)
    people = PersonDirectory(
        identity for row in directory
        for who in (row["assignee"], row["reporter"], *(c["author"] for c in row["comments"]))
        if (identity := _identity(who, row["system"])))

    nodes: dict[str, Node] = {}
    edges: dict[tuple[str, str, str, str, str], Edge] = {}
    mentions: set[Mention] = set()
    references: set[GraphReference] = set()

    def add_edge(src: str, relation: str, dst: str, extractor: str, origin: str,
                 evidence: tuple[tuple[str, ...], str]) -> None:
        key = (src, relation, dst, extractor, origin)
        if key not in edges and src != dst:
            edges[key] = Edge(src, dst, relation, EXPLICIT, extractor, origin, source,
                              evidence[0], evidence[1] or relation)
            for chunk_id in evidence[0]:
                mentions.add(Mention(chunk_id, dst if src == origin else src, origin, source))

    for row in rows:
        origin = ticket_key(source, row["key"])
        nodes[origin] = _node(source, row)
        text = _TicketText(row, chunks_by_doc.get(origin, []))
        _people(row, origin, text, people, nodes, add_edge)
        for label in row["labels"]:
            tag = label.strip().lstrip("#").lower()
            if tag:
                nodes[f"tag:{tag}"] = Node(f"tag:{tag}", "tag", tag, None)
                add_edge(origin, "TAGGED", f"tag:{tag}", "label", origin, text.fact(label))
        for link in row["links"]:
            relation = link_relation(link["outward"])
            inverse = link["direction"] == "inward"
            evidence = text.fact(f"{link['phrase']} {link['target']}")
            target = by_alias.get(link["target"])
            if target:
                src, dst = (target, origin) if inverse else (origin, target)
                add_edge(src, relation, dst, "issue_link", origin, evidence)
            else:
                references.add(GraphReference(
                    source, origin, origin, relation, JIRA, link["target"], link["target"], 1,
                    evidence[0], evidence[1], inverse))
        default_repo = row["repo"] if row["system"] == GITHUB else None
        for ref in find_references(text.text, default_repo=default_repo, skip_lines={1}):
            evidence = text.evidence(ref.start, ref.end)
            target = by_alias.get(ref.target if ref.kind == JIRA else ref.target.lower()) \
                if ref.kind in (JIRA, GITHUB) else None
            if target:
                add_edge(origin, ref.relation, target, "reference", origin, evidence)
            else:
                references.add(GraphReference(
                    source, origin, origin, ref.relation, ref.kind, ref.target, ref.written,
                    ref.line, evidence[0], evidence[1]))

    edge_list = sorted(edges.values(), key=lambda e: (e.src, e.relation, e.dst, e.origin))
    return SourceGraph.assemble(
        nodes, (ticket_key(source, row["key"]) for row in rows), edge_list, [],
        sorted(mentions, key=lambda m: (m.chunk_id, m.node_key)),
        references=sorted(references, key=lambda r: (r.origin, r.line, r.kind, r.target)))


def _people(row: dict, origin: str, text: _TicketText, people: PersonDirectory,
            nodes: dict[str, Node], add_edge) -> None:
    """ASSIGNED_TO / REPORTED_BY / COMMENTED_BY edges from the ticket to person nodes."""
    roles = [(row[field], relation, text.fact(f"{label}: {display_name(row[field])}"))
             for field, relation, label in _PERSON_ROLES]
    comment_at = text.text.find("## Comments")
    for comment in row["comments"]:
        written = f"### {display_name(comment['author']) or 'unknown'}"
        at = text.text.find(written, max(comment_at, 0))
        roles.append((comment["author"], "COMMENTED_BY",
                      text.evidence(at, at + len(written)) if at >= 0 else text.fact("")))
    for who, relation, evidence in roles:
        identity = _identity(who, row["system"])
        person = people.person(identity) if identity else None
        if person is None:
            continue
        nodes[person.key] = Node(person.key, "person", person.name, None,
                                 {"emails": list(person.emails), "names": list(person.names),
                                  "aliases": list(person.aliases)})
        add_edge(origin, relation, person.key, "ticket_field", origin, evidence)


def _extract(source: str, settings, graph: GraphSettings, rows: dict[str, list[dict]],
             chunk_rows: list[dict]) -> SourceGraph:
    return extract_ticket_graph(source, rows["tickets"], chunk_rows, rows["every_ticket"])


# What resolves across a set's tickets (aliases of their keys, the people they name), read
# once; the tickets themselves, with their texts, a batch at a time.
_EVERY_TICKET = ("SELECT key, system, number, repo, url, assignee, reporter, "
                 "list_transform(comments, c -> struct_pack(author := c.author)) AS comments "
                 "FROM tickets WHERE source = ? ORDER BY key")

EXTRACTOR = GraphExtractor(
    {"every_ticket": _EVERY_TICKET},
    _extract,
    DocumentBatches(
        "tickets", "SELECT * EXCLUDE (source, path, file_hash, content_hash, warnings, "
                   "ingested_at) FROM tickets WHERE source = ?", "key",
        lambda source, row: ticket_key(source, row["key"])))
