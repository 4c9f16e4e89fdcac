"""``jarvis bench graph``: graph search latency on a generated vault-shaped graph, through
the store the query side uses (the published copy with its adjacency cached in memory)."""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from jarvis_bench.synthetic_graph import bench_neighbourhood, synthetic_graph
from jarvis_core.stores.graph.cached import CachedGraphStore
from jarvis_core.stores.graph.search import graph_search
from jarvis_core.stores.graph.sqlite import SqliteGraphStore

CENTERS = 300  # centres queried; a tenth of the notes on graphs smaller than 3,000 notes


def run_graph_benchmark(notes: int = 10_000, seed: int = 0) -> dict:
    nodes, edges = synthetic_graph(notes, seed=seed)
    note_keys = [node.key for node in nodes if node.type == "note"]
    centers = random.Random(seed).sample(
        note_keys, min(CENTERS, max(1, len(note_keys) // 10)))
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-graph-") as tmp:
        working, published = Path(tmp) / "graph.sqlite", Path(tmp) / "published.sqlite"
        started = time.perf_counter()
        with SqliteGraphStore(working) as store:
            store.apply([], nodes, edges)
            store.publish_copy(published)
        build_seconds = time.perf_counter() - started
        started = time.perf_counter()
        cached = CachedGraphStore(published)
        load_seconds = time.perf_counter() - started
        try:
            neighbourhoods = {f"depth_{d}": bench_neighbourhood(cached, centers, depth=d)
                              for d in (1, 2, 3)}
            timings = []
            for center in centers:
                started = time.perf_counter()
                graph_search(cached, center, 2)
                timings.append((time.perf_counter() - started) * 1000)
        finally:
            cached.close()
    ordered = sorted(timings)
    return {"notes": notes, "nodes": len(nodes), "edges": len(edges), "centers": len(centers),
            "build_seconds": round(build_seconds, 2), "cache_load_seconds": round(load_seconds, 2),
            "neighbourhood": neighbourhoods,
            "graph_search_depth_2": {"p50_ms": round(statistics.median(ordered), 2),
                                     "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2)}}
