"""What the mail and page extractors share: a source's nodes, edges, mentions, broken links and
references collected document by document, with an edge's evidence merged over every place
it was read (its chunks and the first line), and people folded across sources."""

from __future__ import annotations

from collections.abc import Iterable

from jarvis_core.sources.extraction import BrokenLink, Mention, SourceGraph
from jarvis_core.sources.people import Identity, PersonDirectory
from jarvis_core.sources.references import GraphReference, chunks_holding, line_text
from jarvis_core.stores.graph.elements import EXPLICIT, Edge, Node

Evidence = tuple[tuple[str, ...], str, int]  # chunk ids, the line as text, 1-based line


class DocumentText:
    """A document's text with its chunks' spans, for evidence."""

    def __init__(self, text: str, chunks: Iterable[dict]) -> None:
        self.text = text
        self.spans = sorted((c["char_start"], c["char_end"], c["chunk_id"]) for c in chunks)

    def at(self, start: int, end: int | None = None) -> Evidence:
        start = max(0, min(start, len(self.text)))
        end = start + 1 if end is None else end
        return (chunks_holding(self.spans, start, end), line_text(self.text, start),
                self.text.count("\n", 0, start) + 1)

    def find(self, written: str, start: int = 0, end: int | None = None) -> Evidence | None:
        """Evidence for the first ``written`` in ``text[start:end]``; None when absent."""
        at = self.text.find(written, start, len(self.text) if end is None else end) \
            if written else -1
        return self.at(at, at + len(written)) if at >= 0 else None


class GraphCollector:
    """One source's graph, built document by document."""

    def __init__(self, source: str, people: PersonDirectory) -> None:
        self.source = source
        self.people = people
        self.nodes: dict[str, Node] = {}
        self.documents: list[str] = []
        self._edges: dict[tuple[str, str, str, str, str], list[Evidence]] = {}
        self.mentions: set[Mention] = set()
        self.broken: set[BrokenLink] = set()
        self.references: set[GraphReference] = set()

    def document(self, node: Node) -> None:
        self.nodes[node.key] = node
        self.documents.append(node.key)

    def node(self, node: Node) -> str:
        self.nodes[node.key] = node
        return node.key

    def person(self, identity: Identity | None) -> str | None:
        """The person node of an identity (folded with every spelling the directory knows)."""
        person = self.people.person(identity) if identity else None
        if person is None:
            return None
        return self.node(Node(person.key, "person", person.name, None,
                              {"emails": list(person.emails), "names": list(person.names),
                               "aliases": list(person.aliases)}))

    def tag(self, label: str) -> str | None:
        """The shared ``tag:`` node of a label (as notes and tickets key them)."""
        tag = label.strip().lstrip("#").lower()
        return self.node(Node(f"tag:{tag}", "tag", tag, None)) if tag else None

    def edge(self, src: str, relation: str, dst: str, extractor: str, origin: str,
             evidence: Evidence) -> None:
        if src != dst:
            self._edges.setdefault((src, relation, dst, extractor, origin), []).append(evidence)
            for chunk_id in evidence[0]:
                for key in (src, dst):
                    if key != origin:
                        self.mentions.add(Mention(chunk_id, key, origin, self.source))

    def cite(self, origin: str, relation: str, kind: str, target: str, written: str,
             evidence: Evidence) -> None:
        """A reference for ``cross_source_links`` to resolve in whichever source holds it."""
        self.references.add(GraphReference(self.source, origin, origin, relation, kind, target,
                                           written, evidence[2], evidence[0], evidence[1]))

    def broken_link(self, origin: str, target: str, evidence: Evidence) -> None:
        self.broken.add(BrokenLink(origin, self.source, target, "unresolved", (), evidence[2],
                                   evidence[0]))

    def graph(self) -> SourceGraph:
        edges = []
        for (src, relation, dst, extractor, origin), found in self._edges.items():
            shown = min(found, key=lambda e: (not e[0], e[2]))
            chunks = tuple(sorted({chunk for evidence in found for chunk in evidence[0]}))
            edges.append(Edge(src, dst, relation, EXPLICIT, extractor, origin, self.source,
                              chunks, shown[1] or relation))
        return SourceGraph.assemble(
            self.nodes, self.documents,
            sorted(edges, key=lambda e: (e.src, e.relation, e.dst, e.extractor, e.origin)),
            sorted(self.broken, key=lambda b: (b.origin, b.line, b.target)),
            sorted(self.mentions, key=lambda m: (m.chunk_id, m.node_key)),
            references=sorted(self.references,
                              key=lambda r: (r.origin, r.line, r.kind, r.target, r.written)))
