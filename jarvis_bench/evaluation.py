"""Retrieval quality on a BEIR-layout dataset, measured through Jarvis's own code paths.

Each corpus document (title + text) goes through the chunker and then the vector store
(dense), the keyword index (bm25) or both fused as the query side fuses them (hybrid),
exactly as a note does. Each mode is scored two ways, as the searches can answer:
``document`` (their default) ranks documents as the searches do, hybrid fusing documents
(jarvis_query/retrievers/grouping.py); ``chunk`` fuses the chunks, and only the scoring
folds a query's ranking to documents by their best chunk. For dense and bm25 alone the two
rank the same documents; hybrid's document fusion keeps a document's best three chunks in
each leg. Scores come from trec_eval (pytrec-eval-terrier), as in BEIR.
"""

from __future__ import annotations

import csv
import gzip
import json
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from jarvis_core.config import JarvisConfig
from jarvis_core.stores import tables
from jarvis_core.stores.chunk_rows import FrameRows
from jarvis_core.stores.keyword import KeywordIndex, KeywordSearcher
from jarvis_core.stores.vectors.base import collection_name
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_core.stores.vectors.sync import sync_source
from jarvis_core.text.chunking import Chunk, chunk_document
from jarvis_core.text.tokens import token_counter
from jarvis_query.fusion import fuse
from jarvis_query.results import Hit
from jarvis_query.retrievers.grouping import CHUNK, DOCUMENT, Place, documents, fuse_documents

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
    return chunk_frame({doc_id: (title, chunk_document(
        text, title=title, doc_key=eval_doc_key(doc_id), counter=counter,
        overlap_tokens=config.chunking.overlap_tokens))
        for doc_id, (title, text) in dataset.corpus.items()}, EVAL_SOURCE)


def eval_doc_key(doc_id: str) -> str:
    return f"{EVAL_SOURCE}:{doc_id}"


def chunk_frame(chunked: dict[str, tuple[str, list[Chunk]]], source_type: str) -> pl.DataFrame:
    """Each document's (doc id -> title, chunks) chunks as rows with the columns the vector
    sync and the keyword index read; a chunk's ``path`` is its document's id."""
    rows = [{"chunk_id": chunk.chunk_id, "source": EVAL_SOURCE, "source_type": source_type,
             "doc_key": eval_doc_key(doc_id), "path": doc_id, "title": title,
             "heading_path": list(chunk.heading_path), "context": chunk.context,
             "text": chunk.text, "tags": [], "modified_at": None}
            for doc_id, (title, chunks) in chunked.items() for chunk in chunks]
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
        sync_source(EVAL_SOURCE, FrameRows(chunks), vectors.chunk_ids(EVAL_SOURCE),
                    lambda: nullcontext(vectors), embedder)
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
        index.sync_source(EVAL_SOURCE, FrameRows(chunks))
        with tempfile.TemporaryDirectory(prefix="jarvis-eval-") as tmp:
            index.publish_copy(Path(tmp) / "keyword")
            searcher = KeywordSearcher(Path(tmp) / "keyword")
            hits = {query_id: [(hit.chunk_id, hit.score)
                               for hit in searcher.search(text, CANDIDATE_CHUNKS)]
                    for query_id, text in dataset.queries.items()}
            # closed before its files are removed: Tantivy's reader reloads when they
            # change, writing a lock file among them, which failed the removal
            del searcher
        return hits


Ranking = dict[str, dict[str, float]]  # query id -> doc id -> score


def rankings(dataset: BeirDataset, config: JarvisConfig, modes: tuple[str, ...], embedder,
             index_dir: Path) -> dict[str, dict[str, Ranking]]:
    """mode -> group ("document", "chunk") -> each query's documents with their scores, for
    ``modes`` (dense, bm25, hybrid with RRF); each leg is searched once for all of them. The
    dense index lives in ``index_dir``, the keyword index beside it."""
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        raise ValueError(f"unknown mode {unknown[0]!r}: expected one of {', '.join(MODES)}")
    chunks = chunk_corpus(dataset, config)
    found = places(chunks)
    legs = {}
    if {"dense", "hybrid"} & set(modes):
        legs["dense"] = dense_hits(dataset, chunks, embedder, index_dir)
    if {"bm25", "hybrid"} & set(modes):
        legs["bm25"] = keyword_hits(dataset, chunks,
                                    index_dir.with_name(f"{index_dir.name}.keyword"))
    return ranked_by_group(legs, modes, found)


def places(chunks: pl.DataFrame) -> dict[str, Place]:
    """chunk id -> its document, for grouping."""
    return {chunk_id: Place(EVAL_SOURCE, doc_id, "")
            for chunk_id, doc_id in zip(chunks["chunk_id"], chunks["path"], strict=True)}


def ranked_by_group(legs: dict[str, dict[str, list[tuple[str, float]]]], modes: tuple[str, ...],
                    found: dict[str, Place]) -> dict[str, dict[str, Ranking]]:
    """mode -> group -> each query's documents with their scores, from each leg's chunk hits
    per query (``legs`` has "dense" and/or "bm25", whichever ``modes`` need)."""
    query_ids = list(next(iter(legs.values())))
    ranked = {}
    for mode in modes:
        by_group = {CHUNK: {}, DOCUMENT: {}}
        for query_id in query_ids:
            if mode == "hybrid":
                keyword, dense = legs["bm25"][query_id], legs["dense"][query_id]
                by_group[CHUNK][query_id] = _folded(fuse(keyword, dense), found)
                by_group[DOCUMENT][query_id] = {
                    document.doc_key: value for document, value in fuse_documents(
                        _hits(keyword), _hits(dense), found)}
            else:
                hits = legs[mode][query_id]
                by_group[CHUNK][query_id] = _folded(hits, found)
                by_group[DOCUMENT][query_id] = {
                    document.doc_key: document.hits[0].score
                    for document in documents(_hits(hits), found)}
        ranked[mode] = by_group
    return ranked


def _hits(scored: list[tuple[str, float]]) -> list[Hit]:
    return [Hit.scored(chunk_id, value) for chunk_id, value in scored]


def _folded(hits: list[tuple[str, float]], found: dict[str, Place]) -> dict[str, float]:
    """A query's chunk hits folded to documents, each scored by its best chunk."""
    best: dict[str, float] = {}
    for chunk_id, hit_score in hits:
        doc_id = found[chunk_id].doc_key
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
