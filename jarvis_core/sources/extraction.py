"""How a source kind becomes a graph (``GraphExtractor``: the rows it reads and the pure
function over them) and what every extractor returns (``SourceGraph``): its nodes and edges
(jarvis_core/stores/graph/elements.py), the links that resolve to no note, the chunks that
mention a node, and a fingerprint per document of everything it produced."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from jarvis_core.settings import GraphSettings
from jarvis_core.sources.people import Identity, identities_of
from jarvis_core.sources.references import GraphReference
from jarvis_core.stores.graph.elements import Edge, Node


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
                 references: Sequence[GraphReference] = (),
                 owned: Mapping[str, str] = MappingProxyType({})) -> SourceGraph:
        """Nodes in key order, and a fingerprint per document of its node, of the nodes it
        alone produces (``owned``: node key -> document, as a source file's symbols: a
        changed property rewrites that document), and of every edge, broken link, mention
        and reference it is the origin of."""
        produced: dict[str, list[object]] = {key: [nodes[key]] for key in documents}
        for key in sorted(owned):
            produced[owned[key]].append(nodes[key])
        for item in (*edges, *broken, *mentions, *references):
            produced[item.origin].append(item)
        return cls(nodes=[nodes[key] for key in sorted(nodes)], edges=edges, broken=broken,
                   mentions=mentions,
                   fingerprints={origin: fingerprint(items)
                                 for origin, items in sorted(produced.items())},
                   references=list(references))


@dataclass(frozen=True)
class DocumentBatches:
    """A kind whose documents are extracted a batch at a time (the graph sync reads, extracts
    and writes one batch before the next), for sources too large to hold whole: the rows of
    ``query`` (SQL with the source as its one parameter, a row per document) come to the
    extractor under ``name``, ``resources.batch_documents`` at a time in ``id_column``
    order, with the rows of each ``per_batch`` query (SQL with the source and the batch's
    ids as parameters) and the chunks of the batch's documents (``key``: source and row to
    the document's key). The extractor's own ``queries`` are read once, for every batch:
    what resolves across documents (people, ids to keys)."""

    name: str
    query: str
    id_column: str
    key: Callable[[str, dict], str]
    per_batch: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GraphExtractor:
    """The rows one source kind's graph is made from (SQL with the source as its one
    parameter) and the pure function over them, the source's settings, the graph settings
    and the source's chunks; with ``batches``, a function over one batch of documents."""

    queries: dict[str, str]
    extract: Callable[[str, Any, GraphSettings, dict[str, list[dict]], list[dict]],
                      SourceGraph]
    batches: DocumentBatches | None = None


# A source no longer configured extracts nothing, so its graph is removed.
NO_GRAPH = GraphExtractor({}, lambda *_: SourceGraph([], [], [], [], {}))

# Person nodes of the other sources: their spellings fold a source's people into theirs.
OTHER_PEOPLE = "SELECT properties FROM graph_nodes WHERE type = 'person' AND source <> ?"


def other_people(rows: dict[str, list[dict]]) -> list[Identity]:
    """The identities of the other sources' people, from an extractor's ``OTHER_PEOPLE``
    rows (named ``people``)."""
    return identities_of(row["properties"] for row in rows["people"])
