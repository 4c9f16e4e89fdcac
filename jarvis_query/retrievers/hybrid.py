"""Hybrid retrieval: a keyword and a dense retriever over the same filters, fused
(jarvis_query/fusion.py: reciprocal rank fusion, or weighted by ``alpha``). A version whose
embeddings are still being made (published early) has the keyword leg alone.

Fusion ranks what the search returns: chunks, or with ``group="document"`` documents, each
leg folded to one entry per document (its best chunk) before fusing, so a document's many
matching chunks count once in each leg (jarvis_query/retrievers/grouping.py)."""

from __future__ import annotations

from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.fusion import fuse
from jarvis_query.results import Hit
from jarvis_query.retrievers.base import Retriever
from jarvis_query.retrievers.grouping import (
    CHUNK,
    DOCUMENT,
    Document,
    documents,
    fuse_documents,
    places,
)
from jarvis_query.snapshot import Snapshot

CANDIDATES = 100  # chunks fetched from each leg before fusing
_NOT_FOUND = (None, None)


class HybridRetriever:
    def __init__(self, keyword: Retriever, dense: Retriever) -> None:
        self.keyword = keyword
        self.dense = dense

    def retrieve(self, snapshot: Snapshot, query: str, limit: int,
                 filters: VectorFilter | None = None, alpha: float | None = None,
                 candidates: int = CANDIDATES, group: str = CHUNK) -> list[Hit]:
        """The best ``limit`` of both legs' ``candidates`` chunks fused (documents with
        ``group="document"``), each hit with how they were fused and its rank and score in
        either leg (None where that leg did not find it)."""
        keyword = self.keyword.retrieve(snapshot, query, candidates, filters)
        if snapshot.embeddings["complete"]:
            dense = self.dense.retrieve(snapshot, query, candidates, filters)
            fusion = "rrf" if alpha is None else f"alpha={alpha}"
        else:  # a weight on an empty leg would only flatten the scores
            dense, alpha, fusion = [], None, "keyword only"
        if group == DOCUMENT:
            return _fused_documents(snapshot, keyword, dense, alpha, fusion, limit)
        keyword_legs = _legs((hit.chunk_id, hit) for hit in keyword)
        semantic_legs = _legs((hit.chunk_id, hit) for hit in dense)
        hits = []
        for chunk_id, score in fuse(_scored(keyword), _scored(dense), alpha)[:limit]:
            hits.append(Hit(chunk_id=chunk_id, score=score, fusion=fusion,
                            **_leg_fields(keyword_legs, semantic_legs, chunk_id)))
        return hits


def _fused_documents(snapshot: Snapshot, keyword: list[Hit], dense: list[Hit],
                     alpha: float | None, fusion: str, limit: int) -> list[Hit]:
    """Both legs folded to documents and the best ``limit`` of them fused: each document
    shown by its best chunk in the leg that ranks it higher, with the matching chunks of
    both legs."""
    found = places(snapshot, [hit.chunk_id for hit in keyword + dense])
    keyword_documents = documents(keyword, found)
    dense_documents = documents(dense, found)
    keyword_legs = _legs((d.identity, d.hits[0]) for d in keyword_documents)
    semantic_legs = _legs((d.identity, d.hits[0]) for d in dense_documents)
    keyword_by = {document.identity: document for document in keyword_documents}
    dense_by = {document.identity: document for document in dense_documents}

    def merged(identity: str) -> Document:
        better, other = keyword_by.get(identity), dense_by.get(identity)
        if better is None or (other is not None
                              and semantic_legs[identity][0] < keyword_legs[identity][0]):
            better, other = other, better
        return Document(better.source, better.doc_key,
                        better.hits + (other.hits if other else []))

    fused = fuse_documents(keyword_documents, dense_documents, alpha)
    return [merged(identity).hit(found, score, fusion=fusion,
                                 **_leg_fields(keyword_legs, semantic_legs, identity))
            for identity, score in fused[:limit]]


def _scored(leg: list[Hit]) -> list[tuple[str, float]]:
    return [(hit.chunk_id, hit.score) for hit in leg]


def _legs(ranked) -> dict[str, tuple[int, float]]:
    """id -> (rank from 1, score) in one leg, from (id, hit) pairs best first."""
    return {item: (rank, hit.score) for rank, (item, hit) in enumerate(ranked, 1)}


def _leg_fields(keyword_legs: dict, semantic_legs: dict, item: str) -> dict:
    keyword_rank, keyword_score = keyword_legs.get(item, _NOT_FOUND)
    semantic_rank, semantic_score = semantic_legs.get(item, _NOT_FOUND)
    return {"keyword_rank": keyword_rank, "keyword_score": keyword_score,
            "semantic_rank": semantic_rank, "semantic_score": semantic_score}
