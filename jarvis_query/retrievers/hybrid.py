"""Hybrid retrieval: a keyword and a dense retriever over the same filters, fused
(jarvis_query/fusion.py: reciprocal rank fusion, or weighted by ``alpha``). A version whose
embeddings are still being made (published early) has the keyword leg alone.

Fusion ranks what the search returns: chunks, or with ``group="document"`` documents, each
leg keeping a document's best few chunks, so a document's many matching chunks do not push
the others down (jarvis_query/retrievers/grouping.py)."""

from __future__ import annotations

from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.fusion import fuse
from jarvis_query.results import Hit
from jarvis_query.retrievers.base import Retriever
from jarvis_query.retrievers.grouping import CHUNK, DOCUMENT, documents, fuse_documents, places
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
    """The best ``limit`` documents of both legs fused (grouping.fuse_documents), each shown
    by its best fused chunk, with its rank and best score in either leg."""
    found = places(snapshot, keyword + dense)
    keyword_legs = _legs((d.identity, d.hits[0]) for d in documents(keyword, found))
    semantic_legs = _legs((d.identity, d.hits[0]) for d in documents(dense, found))
    return [document.hit(found, score, fusion=fusion,
                         **_leg_fields(keyword_legs, semantic_legs, document.identity))
            for document, score in fuse_documents(keyword, dense, found, alpha)[:limit]]


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
