"""``jarvis bench search``: semantic query latency through the real query path.

For each size, a serving version is built the way the pipeline publishes one (a DuckDB
tables file, an indexed Qdrant Edge store and the exported query model) and queried through
``KnowledgeBase`` — query embedding (by the exported model, as servers encode), vector search
and the join for snippets included. Embedding 100k real
chunks would take an hour on two cores, so the corpus vectors are real embeddings of a
few hundred chunks, each spread into many nearby unit vectors with seeded noise: the
index sees clustered, embedding-like data; timings do not depend on what the text says.
"""

from __future__ import annotations

import hashlib
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np

from jarvis_bench.embed import seed_vectors, synthetic_chunks
from jarvis_core.config import JarvisConfig
from jarvis_core.settings import EmbeddingSettings
from jarvis_core.stores import serving, tables
from jarvis_core.stores.publish import place_query_model
from jarvis_core.stores.vectors.base import VectorPoint, collection_name
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_core.stores.vectors.sync import payload
from jarvis_core.text.embedder import Embedder
from jarvis_core.text.query_model import prepare_query_model
from jarvis_query.knowledge_base import KnowledgeBase

SEED_CHUNKS = 256
NOISE = 0.35
QUERIES = 100
WARMUP = 10
SOURCE = "bench"


def _corpus_vectors(seeds: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    base = seeds[rng.integers(0, len(seeds), size)]
    noisy = base + NOISE * rng.standard_normal(base.shape).astype(np.float32) / np.sqrt(
        base.shape[1])
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


def _chunk_rows(size: int, texts: list[str]) -> list[dict]:
    return [{"chunk_id": hashlib.sha256(f"bench-{i}".encode()).hexdigest()[:32],
             "source": SOURCE, "source_type": "note", "doc_key": f"note:{SOURCE}/n{i // 5}.md",
             "path": f"n{i // 5}.md", "title": f"Note {i // 5}", "position": i % 5,
             "heading_path": ["Section"], "context": f"Note {i // 5} > Section",
             "text": texts[i % len(texts)], "token_count": 200, "char_start": 0,
             "char_end": 0, "doc_hash": "bench", "tags": ["bench"], "modified_at": None}
            for i in range(size)]


def query_model(model: str, cache_dir: Path) -> tuple[Path | None, str | None]:
    """The exported query model a published version carries (servers encode queries with
    it), or None and why not."""
    return prepare_query_model(EmbeddingSettings(model=model), cache_dir)


def encoded_by(data_dir: Path, why_none: str | None) -> str:
    """What the current version's queries are encoded by, for a benchmark's output."""
    if serving.current_version(data_dir).manifest.get("encoder"):
        return "exported query model"
    return f"full embedder: {why_none}"


def _publish(data_dir: Path, embedder: Embedder, rows: list[dict], vectors: np.ndarray,
             exported: Path | None) -> float:
    """Build and publish a serving version; returns the seconds the index build took."""
    name, staging = serving.begin_version(data_dir)
    chunks = tables.CHUNKS.frame({k: r[k] for k in tables.CHUNKS.schema} for r in rows)
    with duckdb.connect() as conn:
        conn.register("bench_chunks", chunks.to_arrow())
        serving.copy_tables(conn, staging, {"chunks": "SELECT * FROM bench_chunks"},
                            {name: on for name, on in serving.SERVING_INDEXES.items()
                             if on.startswith("chunks(")})
    collection = collection_name(embedder.model, embedder.dimension, embedder.precision)
    with EdgeVectorStore(data_dir / "vectors", collection, embedder.dimension,
                         embedder.model) as vector_store:
        for start in range(0, len(rows), 4096):
            vector_store.upsert([VectorPoint(r["chunk_id"], v, payload(r)) for r, v in
                                 zip(rows[start:start + 4096], vectors[start:start + 4096],
                                     strict=True)])
        started = time.perf_counter()
        vector_store.publish_copy(staging / serving.VECTORS_DIR)
        build_seconds = time.perf_counter() - started
    serving.commit_version(data_dir, name, staging, {
        "model": embedder.model, "dimension": embedder.dimension, "vector_backend": "edge",
        "collection": collection, "chunks": len(rows),
        "encoder": place_query_model(exported, staging) if exported else None})
    return build_seconds


def _percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2)}


def run_search_benchmark(model: str, sizes: tuple[int, ...], cache_dir: Path,
                         seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    embedder = Embedder(model, cache_dir=cache_dir)
    exported, why_none = query_model(model, cache_dir)
    texts = synthetic_chunks(model, SEED_CHUNKS)
    seeds = seed_vectors(embedder, texts, cache_dir)
    queries = [" ".join(text.split()[:12]) for text in synthetic_chunks(model, QUERIES, seed=99)]
    results = {"model": model, "backend": embedder.backend, "queries": QUERIES, "sizes": {}}
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="jarvis-bench-") as tmp:
            data_dir = Path(tmp)
            build = _publish(data_dir, embedder, _chunk_rows(size, texts),
                             _corpus_vectors(seeds, size, rng), exported)
            config = JarvisConfig(data_dir=data_dir, embedding={"model": model})
            results["query_encoder"] = encoded_by(data_dir, why_none)
            kb = KnowledgeBase(config)
            try:
                started = time.perf_counter()
                kb.snapshots.current()
                open_seconds = time.perf_counter() - started
                for query in queries[:WARMUP]:
                    kb.search_semantic(query)
                timings = []
                for query in queries:
                    started = time.perf_counter()
                    hits = kb.search_semantic(query)
                    timings.append(time.perf_counter() - started)
                    assert len(hits) == 10
            finally:
                kb.close()
        results["sizes"][str(size)] = {**_percentiles(timings),
                                       "index_build_seconds": round(build, 1),
                                       "snapshot_open_seconds": round(open_seconds, 2)}
    return results
