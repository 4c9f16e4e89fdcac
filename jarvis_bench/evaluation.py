"""Retrieval quality on a BEIR-layout dataset, measured through Jarvis's own code paths.

Each corpus document (title + text) goes through the chunker and then the vector store
(dense), the keyword index (bm25) or both fused as the query side fuses them (hybrid),
exactly as a note does; a query's ranking is its chunk hits folded to documents by their
best chunk. Scores come from trec_eval (pytrec-eval-terrier), as in BEIR.
"""

from __future__ import annotations

import csv
import gzip
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from jarvis_core.config import JarvisConfig
from jarvis_core.stores import tables
from jarvis_core.stores.keyword import KeywordIndex, KeywordSearcher
from jarvis_core.stores.vectors.base import collection_name
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_core.stores.vectors.sync import sync_source
from jarvis_core.text.chunking import chunk_document
from jarvis_core.text.tokens import token_counter
from jarvis_query.fusion import fuse

EVAL_SOURCE = "beir"
CANDIDATE_CHUNKS = 100
CUTOFF = 10


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus: dict[str, tuple[str, str]]  # doc id -> (title, text)
    queries: dict[str, str]             # only the queries that have judgements
    qrels: dict[str, dict[str, int]]


def load_beir(directory: Path, split: str = "test") -> BeirDataset:
    """Read corpus.jsonl(.gz), queries.jsonl and qrels/<split>.tsv; errors name the file."""
    directory = Path(directory)
    corpus_file = next((directory / n for n in ("corpus.jsonl.gz", "corpus.jsonl")
                        if (directory / n).is_file()), None)
    qrels_file = directory / "qrels" / f"{split}.tsv"
    for required, label in ((corpus_file, "corpus.jsonl(.gz)"),
                            (directory / "queries.jsonl", "queries.jsonl"),
                            (qrels_file, f"qrels/{split}.tsv")):
        if required is None or not required.is_file():
            raise FileNotFoundError(f"{directory}: not a BEIR dataset, {label} is missing")
    opener = gzip.open if corpus_file.suffix == ".gz" else open
    with opener(corpus_file, "rt", encoding="utf-8") as handle:
        corpus = {doc["_id"]: (doc.get("title") or "", doc.get("text") or "")
                  for doc in map(json.loads, handle)}
    qrels: dict[str, dict[str, int]] = {}
    with qrels_file.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    with (directory / "queries.jsonl").open(encoding="utf-8") as handle:
        queries = {q["_id"]: q["text"] for q in map(json.loads, handle) if q["_id"] in qrels}
    return BeirDataset(directory.name, corpus, queries, qrels)


def chunk_corpus(dataset: BeirDataset, config: JarvisConfig) -> pl.DataFrame:
    """The corpus as chunk rows with the columns the vector sync reads."""
    counter = token_counter(config.embedding.model, config.chunking.max_tokens)
    rows = []
    for doc_id, (title, text) in dataset.corpus.items():
        doc_key = f"{EVAL_SOURCE}:{doc_id}"
        for chunk in chunk_document(text, title=title, doc_key=doc_key, counter=counter,
                                    overlap_tokens=config.chunking.overlap_tokens):
            rows.append({"chunk_id": chunk.chunk_id, "source": EVAL_SOURCE,
                         "source_type": EVAL_SOURCE, "doc_key": doc_key, "path": doc_id,
                         "title": title, "heading_path": list(chunk.heading_path),
                         "context": chunk.context, "text": chunk.text, "tags": [],
                         "modified_at": None})
    return pl.DataFrame(rows, schema={**{c: tables.CHUNKS.schema[c] for c in (
        "chunk_id", "source", "source_type", "doc_key", "path", "title", "heading_path",
        "context", "text")}, "tags": pl.List(pl.Utf8), "modified_at": pl.Datetime("us")})


MODES = ("dense", "bm25", "hybrid")


def dense_hits(dataset: BeirDataset, chunks: pl.DataFrame, embedder, index_dir: Path,
               query_vectors: np.ndarray | None = None) -> dict[str, list[tuple[str, float]]]:
    """Index the chunks (reusing vectors already in ``index_dir``); each query's best chunks,
    found with ``query_vectors`` (rows in the order of ``dataset.queries``: another
    embedder's, as the query side encodes queries) or else the embedder's own."""
    collection = collection_name(embedder.model, embedder.dimension, embedder.precision)
    with EdgeVectorStore(index_dir, collection, embedder.dimension, embedder.model) as vectors:
        sync_source(EVAL_SOURCE, chunks, vectors, embedder)
        query_ids = list(dataset.queries)
        if query_vectors is None:
            query_vectors = embedder.embed([dataset.queries[q] for q in query_ids])
        return {query_id: [(hit.chunk_id, hit.score)
                           for hit in vectors.search(vector, limit=CANDIDATE_CHUNKS)]
                for query_id, vector in zip(query_ids, query_vectors, strict=True)}


def keyword_hits(dataset: BeirDataset, chunks: pl.DataFrame,
                 index_dir: Path) -> dict[str, list[tuple[str, float]]]:
    """Index the chunks in a keyword index (incrementally) and publish a copy the way the
    serving layer does; each query's best chunks from that copy."""
    with KeywordIndex(index_dir) as index:
        index.sync_source(EVAL_SOURCE, chunks)
        with tempfile.TemporaryDirectory(prefix="jarvis-eval-") as tmp:
            index.publish_copy(Path(tmp) / "keyword")
            searcher = KeywordSearcher(Path(tmp) / "keyword")
            return {query_id: [(hit.chunk_id, hit.score)
                               for hit in searcher.search(text, CANDIDATE_CHUNKS)]
                    for query_id, text in dataset.queries.items()}


def rankings(dataset: BeirDataset, config: JarvisConfig, mode: str, embedder,
             index_dir: Path) -> dict[str, dict[str, float]]:
    """doc id -> score per query for ``mode`` (dense, bm25 or hybrid with RRF); the dense
    index lives in ``index_dir``, the keyword index beside it."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: expected one of {', '.join(MODES)}")
    chunks = chunk_corpus(dataset, config)
    document_of = dict(zip(chunks["chunk_id"], chunks["path"], strict=True))
    keyword_dir = index_dir.with_name(f"{index_dir.name}.keyword")
    if mode == "dense":
        hits = dense_hits(dataset, chunks, embedder, index_dir)
    elif mode == "bm25":
        hits = keyword_hits(dataset, chunks, keyword_dir)
    else:
        dense = dense_hits(dataset, chunks, embedder, index_dir)
        keyword = keyword_hits(dataset, chunks, keyword_dir)
        hits = {q: fuse(keyword[q], dense[q]) for q in dataset.queries}
    return {query_id: best_documents(found, document_of) for query_id, found in hits.items()}


def best_documents(hits: list[tuple[str, float]], document_of: dict[str, str]) -> dict[str, float]:
    """A query's chunk hits folded to documents, each scored by its best chunk."""
    best: dict[str, float] = {}
    for chunk_id, hit_score in hits:
        doc_id = document_of[chunk_id]
        best[doc_id] = max(best.get(doc_id, hit_score), hit_score)
    return best


def score(dataset: BeirDataset, rankings: dict[str, dict[str, float]]) -> dict[str, float]:
    import pytrec_eval

    measures = {f"ndcg_cut.{CUTOFF}", f"recall.{CUTOFF}"}
    top = {q: dict(sorted(r.items(), key=lambda kv: (-kv[1], kv[0]))[:CANDIDATE_CHUNKS])
           for q, r in rankings.items()}
    per_query = pytrec_eval.RelevanceEvaluator(dataset.qrels, measures).evaluate(top)
    count = len(dataset.queries)
    return {
        f"ndcg_at_{CUTOFF}": round(sum(m[f"ndcg_cut_{CUTOFF}"] for m in per_query.values())
                                   / count, 4),
        f"recall_at_{CUTOFF}": round(sum(m[f"recall_{CUTOFF}"] for m in per_query.values())
                                     / count, 4),
    }
