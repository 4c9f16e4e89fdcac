"""Graph search as the query side shows it: a neighbourhood grouped by relation."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass
from jarvis_core.stores.graph.base import DEFAULT_LIMIT, LINK, NOTE, TAG, TAGGED, GraphStore


def graph_search(store: GraphStore, center_key: str, depth: int = 1, *,
                 limit: int = DEFAULT_LIMIT) -> dict:
    """The neighbourhood of ``center_key`` as the query API returns it: the centre, the
    connected notes with their distance and tags, the edges grouped by relation with their
    evidence, and counts. Raises GraphNodeNotFound (a KeyError) for an absent centre."""
    subgraph = store.neighbourhood(center_key, depth, limit=limit)
    center, others = subgraph.nodes[0], subgraph.nodes[1:]
    notes = [n for n in others if n.type == NOTE]
    tags = store.targets([n.key for n in (center, *notes) if n.type == NOTE], TAGGED)

    def tag_names(key: str) -> list[str]:
        return [tag.title for tag in tags.get(key, [])]

    titles = {n.key: n.title for n in subgraph.nodes}
    relationships: dict[str, list[dict]] = defaultdict(list)
    for edge in subgraph.edges:
        relationships[edge.relation].append({
            "src": edge.src, "dst": edge.dst, "src_title": titles[edge.src],
            "dst_title": titles[edge.dst], "evidence": list(edge.evidence),
            "evidence_text": edge.evidence_text, "extractor": edge.extractor,
            "confidence": edge.confidence})
    by_type = Counter(n.type for n in others)
    center_view = center.as_dict()
    if center.type == NOTE:
        center_view["tags"] = tag_names(center.key)
    return {
        "center": center_view,
        "depth": depth,
        "truncated": subgraph.truncated,
        "notes": [{"key": n.key, "title": n.title, "source": n.source, "distance": n.distance,
                   "tags": tag_names(n.key)} for n in notes],
        "relationships": {relation: relationships[relation] for relation in sorted(relationships)},
        "counts": {"notes": len(notes), "tags": by_type[TAG], "links": by_type[LINK],
                   "relationships": len(subgraph.edges),
                   "by_relation": {r: len(relationships[r]) for r in sorted(relationships)}},
    }
