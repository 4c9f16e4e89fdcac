"""``jarvis bench analytics``: how long a fresh analytics snapshot of a generated vault takes,
and how fast ``get_vault_context`` answers through the real query path, cached and not.

The vault is ``synthetic_graph``'s (Zipf-popular link targets, tags, URLs) with note rows
whose word counts, headings, frontmatter and dates are drawn from a seeded generator, some
broken links, spread over folders of 50 notes; it is written to a DuckDB file with the
pipeline's schema, snapshotted as the asset does, and published as a serving version.
"""

from __future__ import annotations

import hashlib
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from jarvis_bench.synthetic_graph import synthetic_graph
from jarvis_core.analytics.charts import render_charts
from jarvis_core.analytics.figures import compute_snapshot
from jarvis_core.analytics.history import history, record_snapshot
from jarvis_core.config import AnalyticsSettings, JarvisConfig
from jarvis_core.sources import registry
from jarvis_core.sources.vault.settings import VaultConfig
from jarvis_core.stores import serving, tables
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_query.knowledge_base import KnowledgeBase

SOURCE = "bench"
NOTES_PER_FOLDER = 50
CACHED_CALLS = 200


def _vault_tables(notes: int, seed: int, now: datetime) -> dict[str, list[dict]]:
    """Rows of the tables a snapshot reads, for a generated vault of ``notes`` notes."""
    rng = random.Random(seed)
    nodes, edges = synthetic_graph(notes, seed=seed, source=SOURCE)
    note_rows, node_rows = [], []
    for node in nodes:
        node_rows.append({"source": SOURCE, "node_key": node.key, "type": node.type,
                          "title": node.title, "node_source": node.source,
                          "properties": str(node.properties), "first_seen": now,
                          "last_seen": now})
        if node.type != "note":
            continue
        index = int(node.key.rsplit("-", 1)[-1].removesuffix(".md"))
        name = node.key.removeprefix(f"note:{SOURCE}/")
        note_rows.append({
            "source": SOURCE, "path": f"area-{index // 1000:02d}/topic-"
                                      f"{index // NOTES_PER_FOLDER:04d}/{name}",
            "note_key": node.key, "title": node.title,
            "content_hash": hashlib.sha256(node.key.encode()).hexdigest(),
            "frontmatter": '{"tags": ["bench"]}' if rng.random() < 0.8 else "{}",
            "headings": [{"level": 2, "text": f"Part {h}", "line": h}
                         for h in range(rng.randint(0, 6))],
            "word_count": node.properties["words"],
            "modified_at": now - timedelta(days=rng.randint(0, 365)),
        })
    edge_rows = [{"edge_key": edge.key, "source": SOURCE, "origin": edge.origin,
                  "src": edge.src, "dst": edge.dst, "relation": edge.relation,
                  "confidence": edge.confidence, "extractor": edge.extractor,
                  "evidence": list(edge.evidence), "evidence_text": edge.evidence_text,
                  "weight": edge.weight} for edge in edges]
    broken = [{"source": SOURCE, "origin": row["note_key"], "target": f"Missing {i % 97}",
               "reason": "unresolved", "candidates": [], "line": 3, "evidence": []}
              for i, row in enumerate(note_rows) if rng.random() < 0.02]
    return {"notes": note_rows, "graph_nodes": node_rows, "graph_edges": edge_rows,
            "graph_broken_links": broken}


def _publish(data_dir: Path, conn: duckdb.DuckDBPyConnection) -> None:
    """A serving version as the pipeline publishes it: every serving table (those the vault
    context does not read stay empty) and an empty vector shard."""
    name, staging = serving.begin_version(data_dir)
    serving.copy_tables(conn, staging, registry.published_tables())
    with EdgeVectorStore(data_dir / "vectors", "bench", 4, "bench") as vectors:
        vectors.publish_copy(staging / serving.VECTORS_DIR)
    serving.commit_version(data_dir, name, staging, {
        "model": "bench", "dimension": 4, "vector_backend": "edge", "collection": "bench",
        "graph_backend": "embedded", "chunks": 0})


def run_analytics_benchmark(notes: int = 10_000, seed: int = 0) -> dict:
    now = datetime.now(UTC).replace(tzinfo=None)
    vault_tables = _vault_tables(notes, seed, now)
    settings = AnalyticsSettings()
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-analytics-") as tmp:
        data_dir = Path(tmp) / "data"
        (Path(tmp) / "vault").mkdir()
        with duckdb.connect(str(Path(tmp) / "jarvis.duckdb")) as conn:
            tables.ensure_schema(conn, registry.declared_tables())
            for table, rows in vault_tables.items():
                tables.replace_rows(conn, registry.table(table), source=SOURCE, remove_paths=None,
                                   rows=rows)
            started = time.perf_counter()
            snapshot = compute_snapshot(conn, SOURCE, settings, now)
            record_snapshot(conn, snapshot, settings.keep_snapshots)
            snapshot_seconds = time.perf_counter() - started
            started = time.perf_counter()
            render_charts(snapshot, history(conn, SOURCE))
            chart_seconds = time.perf_counter() - started
            _publish(data_dir, conn)
        config = JarvisConfig(data_dir=data_dir,
                              sources={SOURCE: VaultConfig(path=Path(tmp) / "vault")})
        kb = KnowledgeBase(config)
        try:
            started = time.perf_counter()
            kb.snapshots.current()
            open_seconds = time.perf_counter() - started
            started = time.perf_counter()
            first = kb.get_vault_context(SOURCE)
            uncached_ms = (time.perf_counter() - started) * 1000
            timings = []
            for _ in range(CACHED_CALLS):
                started = time.perf_counter()
                answer = kb.get_vault_context(SOURCE)
                timings.append((time.perf_counter() - started) * 1000)
        finally:
            kb.close()
    if first["cache_hit"] or not answer["cache_hit"] or first["is_stale"]:
        raise RuntimeError(f"unexpected vault context: cache_hit {first['cache_hit']} then "
                           f"{answer['cache_hit']}, is_stale {first['is_stale']}")
    ordered = sorted(timings)
    totals = snapshot.figures["totals"]
    return {
        "notes": notes, "links": totals["links"], "edges": len(vault_tables["graph_edges"]),
        "communities": totals["communities"], "modularity": totals["modularity"],
        "fresh_snapshot_seconds": round(snapshot_seconds, 3),
        "snapshot_compute_seconds": snapshot.compute_seconds,
        "chart_seconds": round(chart_seconds, 3),
        "snapshot_open_seconds": round(open_seconds, 3),
        "uncached_context_ms": round(uncached_ms, 2),
        "cached_context_p50_ms": round(statistics.median(ordered), 4),
        "cached_context_p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 4),
        "goals": {"cached_context_ms": 50, "fresh_snapshot_seconds": 10},
    }
