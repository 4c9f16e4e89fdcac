"""Graph retrieval from the published graph: the neighbourhood of one document as graph
search shows it, and the joint neighbourhoods of seed documents that GraphRAG widens its
hits with. Callers catch ``snapshot.graph_failures()`` when the graph cannot be read."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from jarvis_core.stores.graph.base import GraphNodeNotFound
from jarvis_core.stores.graph.search import graph_search
from jarvis_query.snapshot import Snapshot
from jarvis_query.symbols import document_key, symbol_node_key

NEIGHBOURHOOD_LIMIT = 200


@dataclass
class Neighbourhoods:
    """What the seeds' neighbourhoods hold: node -> {seed: hops}, edge key -> edge, and
    node key -> node (key, type, title, source)."""

    distances: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))
    edges: dict[str, dict] = field(default_factory=dict)
    nodes: dict[str, dict] = field(default_factory=dict)


class GraphRetriever:
    def search(self, snapshot: Snapshot, key: str, depth: int) -> dict:
        """The neighbourhood of node ``key``: connected notes with tags, relationships by
        type, counts (jarvis_core.stores.graph.search)."""
        return graph_search(snapshot.graph(), key, depth)

    def neighbourhoods(self, snapshot: Snapshot, seeds: list[str], depth: int
                       ) -> Neighbourhoods:
        """The seeds' (document keys) neighbourhoods within ``depth`` hops, merged (a seed
        the graph does not hold, e.g. a document of a source without links, is skipped). A
        code document is walked from its symbol's node, and a symbol is named by its code
        document (jarvis_query/symbols.py), as every other node by its document's key."""
        graph = snapshot.graph()
        found = Neighbourhoods()
        for seed in seeds:
            try:
                subgraph = graph.neighbourhood(symbol_node_key(seed), depth,
                                               limit=NEIGHBOURHOOD_LIMIT)
            except GraphNodeNotFound:
                continue
            for node in subgraph.nodes:
                key = document_key(node.key)
                found.distances[key][seed] = node.distance
                found.nodes[key] = {"key": key, "type": node.type, "title": node.title,
                                    "source": node.source}
            for edge in subgraph.edges:
                found.edges[edge.key] = {"src": document_key(edge.src),
                                         "dst": document_key(edge.dst),
                                         "relation": edge.relation,
                                         "confidence": edge.confidence,
                                         "evidence": list(edge.evidence),
                                         "evidence_text": edge.evidence_text}
        return found
