"""``jarvis bench query``: p50/p95 latency of every query tool, through ``KnowledgeBase``, on
a published version of the embedded defaults (DuckDB tables, Qdrant Edge, the Tantivy
keyword index, the SQLite graph) at 100k chunks.

The corpus is 20k notes of five chunks. Keyword latency depends on how many chunks a query
term reaches, so chunk text is not repeated: each chunk is 150 words drawn with Zipf
frequencies (s = 1) from the ~20k whole English words of the model's vocabulary, and queries
are 2-5 words from ranks 50-5,000 (content words, as people type them). Vectors are the
``bench search`` ones: real embeddings of a few hundred chunks spread with seeded noise.
The graph is ``bench graph``'s generator (Zipf-popular links, tags, URLs) over the same notes.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from jarvis_bench.embed import seed_vectors, synthetic_chunks
from jarvis_bench.search import (
    SEED_CHUNKS,
    SOURCE,
    WARMUP,
    _corpus_vectors,
    _percentiles,
    _publish,
    encoded_by,
    query_model,
)
from jarvis_bench.synthetic_graph import synthetic_graph
from jarvis_core.config import JarvisConfig
from jarvis_core.sources import registry
from jarvis_core.stores import serving, tables
from jarvis_core.stores.chunk_rows import FrameRows
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_core.stores.keyword import CHUNK_COLUMNS, KeywordIndex
from jarvis_core.text.embedder import Embedder
from jarvis_core.text.tokens import resolve_model_dir
from jarvis_query.knowledge_base import KnowledgeBase

CHUNKS_PER_NOTE = 5
WORDS_PER_CHUNK = 150
QUERY_RANKS = (50, 5_000)
GOALS_MS = {"keyword": 20, "semantic": 30, "hybrid": 50, "graph_depth_2": 20, "graphrag": 300}


def _vocabulary(model: str) -> list[str]:
    """Whole lower-case words of the model's WordPiece vocabulary, in its (frequency-like)
    order."""
    lines = (resolve_model_dir(model) / "vocab.txt").read_text(encoding="utf-8").splitlines()
    return [word for word in lines if word.isascii() and word.isalpha() and len(word) > 2]


def _texts(words: list[str], count: int, rng: np.random.Generator) -> list[str]:
    ranks = np.arange(1, len(words) + 1)
    weights = 1.0 / ranks
    drawn = rng.choice(len(words), size=(count, WORDS_PER_CHUNK), p=weights / weights.sum())
    vocabulary = np.array(words, dtype=object)
    return [" ".join(row) for row in vocabulary[drawn]]


def _queries(words: list[str], rng: random.Random, count: int) -> list[str]:
    pool = words[QUERY_RANKS[0]:QUERY_RANKS[1]]
    return [" ".join(rng.sample(pool, rng.randint(2, 5))) for _ in range(count)]


def _rows(texts: list[str], note_keys: list[str]) -> list[dict]:
    rows = []
    for i, text in enumerate(texts):
        key = note_keys[i // CHUNKS_PER_NOTE]
        path = key.removeprefix(f"note:{SOURCE}/")
        rows.append({"chunk_id": f"{i:032x}", "source": SOURCE, "source_type": "note",
                     "doc_key": key, "path": path, "title": f"Note {i // CHUNKS_PER_NOTE}",
                     "position": i % CHUNKS_PER_NOTE, "heading_path": ["Section"],
                     "context": f"Note {i // CHUNKS_PER_NOTE} > Section", "text": text,
                     "token_count": 200, "char_start": 0, "char_end": 0, "doc_hash": "bench",
                     "tags": [f"topic-{i % 200:03d}"], "modified_at": None})
    return rows


def _complete_version(data_dir: Path, rows: list[dict], graph_nodes, graph_edges) -> dict:
    """Add what ``bench search``'s version lacks: the notes, documents (with their names) and
    graph_edges tables, the keyword index and the graph. The version is in a private
    temporary directory no reader has opened yet."""
    version = serving.current_version(data_dir)
    seconds = {}
    notes = registry.table("notes").frame(
        {"source": SOURCE, "path": r["path"], "note_key": r["doc_key"], "title": r["title"],
         "tags": [], "aliases": []} for r in rows if r["position"] == 0)
    documents = tables.DOCUMENTS.frame(  # what the identifier lookup of every search reads
        {"source": SOURCE, "source_type": "note", "doc_key": r["doc_key"], "path": r["path"],
         "title": r["title"], "doc_hash": "bench", "modified_at": None, "tags": r["tags"],
         "names": [r["title"].lower()]} for r in rows if r["position"] == 0)
    edges = registry.table("graph_edges").frame(
        {"edge_key": edge.key, "source": SOURCE, "origin": edge.origin, "src": edge.src,
         "dst": edge.dst, "relation": edge.relation, "confidence": edge.confidence,
         "extractor": edge.extractor, "evidence": list(edge.evidence),
         "evidence_text": edge.evidence_text, "weight": edge.weight} for edge in graph_edges)
    with duckdb.connect(str(version.tables_path)) as conn:
        for table, rows_frame in (("notes", notes), ("documents", documents),
                                  ("graph_edges", edges)):
            conn.register(f"bench_{table}", rows_frame.to_arrow())
            conn.execute(f"CREATE TABLE {table} AS SELECT * FROM bench_{table}")
        conn.execute("CREATE TABLE document_names AS "
                     f"{serving.SERVING_TABLES['document_names']}")
        conn.execute("CREATE INDEX document_names_by_name ON "
                     f"{serving.SERVING_INDEXES['document_names_by_name']}")
    started = time.perf_counter()
    with KeywordIndex(data_dir / "keyword") as index:
        index.sync_source(SOURCE, FrameRows(pl.DataFrame(rows).select(CHUNK_COLUMNS)))
        index.publish_copy(version.keyword_path)
    seconds["keyword_index_seconds"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    with SqliteGraphStore(data_dir / "graph.sqlite") as graph:
        graph.apply([], graph_nodes, graph_edges)
        graph.publish_copy(version.graph_path)
    seconds["graph_build_seconds"] = round(time.perf_counter() - started, 1)
    return seconds


def _timed(call: Callable[[str], object], arguments: list[str]) -> dict:
    for argument in arguments[:WARMUP]:
        call(argument)
    timings = []
    for argument in arguments:
        started = time.perf_counter()
        call(argument)
        timings.append(time.perf_counter() - started)
    return _percentiles(timings)


def run_query_benchmark(model: str, chunks: int, queries: int, cache_dir: Path,
                        seed: int = 11) -> dict:
    """p50/p95 of each tool over ``queries`` queries (at most one per note; each tool's
    first ``WARMUP`` run once before, untimed)."""
    rng, pick = np.random.default_rng(seed), random.Random(seed)
    notes = chunks // CHUNKS_PER_NOTE
    words = _vocabulary(model)
    embedder = Embedder(model, cache_dir=cache_dir)
    seeds = seed_vectors(embedder, synthetic_chunks(model, SEED_CHUNKS), cache_dir)
    exported, why_none = query_model(model, cache_dir)
    graph_nodes, graph_edges = synthetic_graph(notes, seed=seed, source=SOURCE)
    note_keys = [node.key for node in graph_nodes if node.type == "note"]
    rows = _rows(_texts(words, notes * CHUNKS_PER_NOTE, rng), note_keys)
    texts = _queries(words, pick, queries)
    names = [f"note {pick.randrange(notes)}" for _ in range(queries)]  # titles are "Note <n>"
    centres = [key.removeprefix(f"note:{SOURCE}/") for key in pick.sample(note_keys, queries)]
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-query-") as tmp:
        data_dir = Path(tmp)
        build = {"vector_index_seconds": round(_publish(
            data_dir, embedder, rows, _corpus_vectors(seeds, len(rows), rng), exported), 1)}
        build |= _complete_version(data_dir, rows, graph_nodes, graph_edges)
        build["query_encoder"] = encoded_by(data_dir, why_none)
        vault = data_dir / SOURCE  # configured, so lookups search it; nothing reads its files
        vault.mkdir()
        kb = KnowledgeBase(JarvisConfig(data_dir=data_dir, sources={
            SOURCE: registry.kind("vault").settings(path=vault)},
                                        embedding={"model": model}))
        try:
            started = time.perf_counter()
            kb.snapshots.current()
            build["snapshot_open_seconds"] = round(time.perf_counter() - started, 2)
            tools = {
                "keyword": _timed(lambda q: kb.search_vault(q, search_content=True), texts),
                "keyword_names": _timed(kb.search_vault, names),
                "semantic": _timed(kb.search_semantic, texts),
                "hybrid": _timed(kb.search_hybrid, texts),
                "graph_depth_2": _timed(lambda note: kb.search_graph(note, depth=2), centres),
                "graphrag": _timed(kb.search_graphrag, texts),
            }
        finally:
            kb.close()
    for tool, goal in GOALS_MS.items():
        tools[tool]["goal_p50_ms"] = goal
    return {"model": model, "backend": embedder.backend, "chunks": len(rows), "notes": notes,
            "graph_edges": len(graph_edges), "queries": queries, **build, "tools": tools}
