"""One typed node/edge model for every source kind, with evidence on every edge.

Keys are namespaced and canonical (``note:<vault>/<path>``, ``tag:<name>``, ``link:<url>``,
``commit:<repo>/<sha>``, ``file:<source>/<path>``, ``repo_doc:<repo>/<path>``,
``component:<repo>/<name>``, ``person:<canonical id>``, ``ticket:<KEY>`` for Jira and
``ticket:<owner/repo or repo>#<n>`` for GitHub). Every edge names its *origin*: the
document whose content produced it. A changed document's subgraph is rewritten by
deleting the edges of that origin and inserting the new ones; a node other than a document
(note, commit, repo doc, ticket) that no edge touches any more is garbage.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from jarvis_core.sources.references import GraphReference

EXPLICIT = "explicit"   # written in the text (a link, a tag, a typed relation)
INFERRED = "inferred"   # computed (e.g. embedding similarity)

NODE_TYPES = ("note", "tag", "link", "commit", "repo_doc", "ticket", "person", "file",
              "component")


@dataclass(frozen=True)
class Node:
    key: str
    type: str
    title: str
    source: str | None            # the source it belongs to; None for shared nodes (tags, links)
    properties: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    relation: str                 # upper snake case: LINKS_TO, EMBEDS, TAGGED, CHILD_OF, ...
    confidence: str               # EXPLICIT or INFERRED
    extractor: str                # wikilink, embed, markdown_link, frontmatter, tag, ...
    origin: str                   # key of the document whose content produced the edge
    source: str                   # the source (partition) of that document
    evidence: tuple[str, ...]     # chunk ids whose text supports the edge
    evidence_text: str            # the line the edge was read from (frontmatter included)
    weight: float = 1.0

    @property
    def key(self) -> str:
        raw = "\x1f".join((self.src, self.relation, self.dst, self.extractor, self.origin))
        return hashlib.sha256(raw.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class BrokenLink:
    """A link whose target resolves to no note (or to several): kept apart, never a node."""

    origin: str
    source: str
    target: str                   # as written
    reason: str                   # "unresolved" or "ambiguous"
    candidates: tuple[str, ...]   # note keys an ambiguous target could mean
    line: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Mention:
    """A chunk mentions a node (both directions are queried from this one table)."""

    chunk_id: str
    node_key: str
    origin: str
    source: str


def fingerprint(items: Iterable[object]) -> str:
    """A digest of everything a document produced: equal digests, nothing to rewrite."""
    digest = hashlib.sha256()
    for item in items:  # vars, not asdict: the same JSON without asdict's deep copies
        digest.update(json.dumps(vars(item), sort_keys=True, ensure_ascii=False,
                                 default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


@dataclass
class SourceGraph:
    """What the extractor of any source kind returns for one source."""

    nodes: list[Node]
    edges: list[Edge]
    broken: list[BrokenLink]
    mentions: list[Mention]
    fingerprints: dict[str, str]  # origin document key -> sha256 of everything it produced
    # references to other sources' tickets, commits and files (resolved by cross_source_links)
    references: list[GraphReference] = field(default_factory=list)

    @classmethod
    def assemble(cls, nodes: Mapping[str, Node], documents: Iterable[str], edges: list[Edge],
                 broken: list[BrokenLink], mentions: list[Mention],
                 references: Sequence[GraphReference] = ()) -> SourceGraph:
        """Nodes in key order, and a fingerprint per document of its node and of every
        edge, broken link, mention and reference it is the origin of."""
        produced: dict[str, list[object]] = {key: [nodes[key]] for key in documents}
        for item in (*edges, *broken, *mentions, *references):
            produced[item.origin].append(item)
        return cls(nodes=[nodes[key] for key in sorted(nodes)], edges=edges, broken=broken,
                   mentions=mentions,
                   fingerprints={origin: fingerprint(items)
                                 for origin, items in sorted(produced.items())},
                   references=list(references))
