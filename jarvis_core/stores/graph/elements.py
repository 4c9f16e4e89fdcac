"""The nodes and edges every graph store holds, one typed model for every source kind.

Keys are namespaced and canonical (``note:<vault>/<path>``, ``tag:<name>``, ``link:<url>``,
``commit:<repo>/<sha>``, ``file:<source>/<path>``, ``repo_doc:<repo>/<path>``,
``component:<repo>/<name>``, ``person:<canonical id>``, ``ticket:<source>/<KEY>`` for Jira
and ``ticket:<source>/<owner/repo or repo>#<n>`` for GitHub, ``thread:<source>/<id>``,
``page:<source>/<id>``): a document's key carries its source, so the same item in two
sources is two nodes (``cross_source`` links them by SAME_AS). Every edge names its
*origin*: the document whose content produced it, and its evidence. A changed document's subgraph is
rewritten by deleting the edges of that origin and inserting the new ones; a node other than
a document (note, commit, repo doc, ticket) that no edge touches any more is garbage.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

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
