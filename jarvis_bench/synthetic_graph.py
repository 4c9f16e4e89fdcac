"""A generated vault graph with realistic link popularity, for graph benchmarks."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jarvis_core.stores.graph.elements import EXPLICIT, Edge, Node

if TYPE_CHECKING:
    pass
from jarvis_core.stores.graph.base import DEFAULT_LIMIT, LINK, NOTE, TAG, TAGGED, GraphStore


def bench_neighbourhood(store: GraphStore, centers: Sequence[str], depth: int = 2, *,
                        limit: int = DEFAULT_LIMIT) -> dict:
    """Latency of ``neighbourhood`` over ``centers`` (after one untimed warm-up query)."""
    if not centers:
        raise ValueError("bench_neighbourhood needs at least one centre")
    store.neighbourhood(centers[0], depth, limit=limit)
    timings, sizes = [], []
    for center in centers:
        started = time.perf_counter()
        subgraph = store.neighbourhood(center, depth, limit=limit)
        timings.append((time.perf_counter() - started) * 1000)
        sizes.append(len(subgraph.nodes))
    ranks = statistics.quantiles(timings, n=100, method="inclusive") if len(timings) > 1 \
        else timings * 99
    return {"queries": len(timings), "depth": depth, "limit": limit,
            "p50_ms": round(ranks[49], 3), "p95_ms": round(ranks[94], 3),
            "max_ms": round(max(timings), 3), "nodes_p50": statistics.median(sizes)}


def synthetic_graph(notes: int = 10_000, *, seed: int = 0, source: str = "bench",
                    links_per_note: int = 5, tags: int = 200, tags_per_note: int = 3,
                    max_urls_per_note: int = 3) -> tuple[list[Node], list[Edge]]:
    """A vault-shaped graph for benchmarks: link targets drawn with Zipf popularity (a few
    hub notes, a long tail), tags uniformly, 0..max URLs per note from a Zipf-shared pool."""
    rng = random.Random(seed)
    note_keys = [f"note:{source}/note-{i:06d}.md" for i in range(notes)]
    tag_keys = [f"tag:topic-{i:03d}" for i in range(tags)]
    url_keys = [f"link:https://example.com/page-{i}" for i in range(max(1, notes // 2))]

    def zipf_cumulative(count: int) -> list[float]:
        total, cumulative = 0.0, []
        for rank in range(count):
            total += 1 / (rank + 1)
            cumulative.append(total)
        return cumulative

    link_targets = rng.sample(note_keys, len(note_keys))  # popularity unrelated to key order
    link_weights = zipf_cumulative(len(link_targets))
    url_weights = zipf_cumulative(len(url_keys))
    nodes = [Node(key, NOTE, f"Note {i}", source, {"words": rng.randint(50, 2000)})
             for i, key in enumerate(note_keys)]
    edges = []
    for note in note_keys:
        chunk = f"{rng.getrandbits(128):032x}"
        links = sorted(set(rng.choices(link_targets, cum_weights=link_weights,
                                       k=links_per_note)) - {note})
        urls = sorted(set(rng.choices(url_keys, cum_weights=url_weights,
                                      k=rng.randint(0, max_urls_per_note))))
        targets = [(t, "LINKS_TO", "wikilink", f"see [[{t}]]") for t in links]
        targets += [(t, TAGGED, "tag", f"#{t.removeprefix('tag:')}")
                    for t in sorted(rng.sample(tag_keys, tags_per_note))]
        targets += [(t, "LINKS_TO", "bare_url", t.removeprefix("link:")) for t in urls]
        edges += [Edge(note, dst, relation, EXPLICIT, extractor, note, source, (chunk,), text)
                  for dst, relation, extractor, text in targets]
    used = {e.dst for e in edges}
    nodes += [Node(key, TAG, key.removeprefix("tag:"), None) for key in tag_keys if key in used]
    nodes += [Node(key, LINK, key.removeprefix("link:"), None) for key in url_keys if key in used]
    return nodes, edges
