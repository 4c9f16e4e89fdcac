"""Hybrid retrieval: a keyword and a dense retriever over the same filters, fused
(jarvis_query/fusion.py: reciprocal rank fusion, or weighted by ``alpha``). A version whose
embeddings are still being made (published early) has the keyword leg alone."""

from __future__ import annotations

from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.fusion import fuse
from jarvis_query.results import Hit
from jarvis_query.retrievers.base import Retriever
from jarvis_query.snapshot import Snapshot

CANDIDATES = 100  # chunks fetched from each leg before fusing
_NOT_FOUND = (None, None)


class HybridRetriever:
    def __init__(self, keyword: Retriever, dense: Retriever) -> None:
        self.keyword = keyword
        self.dense = dense

    def retrieve(self, snapshot: Snapshot, query: str, limit: int,
                 filters: VectorFilter | None = None, alpha: float | None = None,
                 candidates: int = CANDIDATES) -> list[Hit]:
        """The best ``limit`` of both legs' ``candidates`` chunks fused, each hit with how
        they were fused and its rank and score in either leg."""
        keyword = self.keyword.retrieve(snapshot, query, candidates, filters)
        if snapshot.embeddings["complete"]:
            dense = self.dense.retrieve(snapshot, query, candidates, filters)
            fusion = "rrf" if alpha is None else f"alpha={alpha}"
        else:  # a weight on an empty leg would only flatten the scores
            dense, alpha, fusion = [], None, "keyword only"
        keyword_legs = _legs(keyword)
        semantic_legs = _legs(dense)
        hits = []
        for chunk_id, score in fuse(_scored(keyword), _scored(dense), alpha)[:limit]:
            keyword_rank, keyword_score = keyword_legs.get(chunk_id, _NOT_FOUND)
            semantic_rank, semantic_score = semantic_legs.get(chunk_id, _NOT_FOUND)
            hits.append(Hit(chunk_id=chunk_id, score=score, fusion=fusion,
                            keyword_rank=keyword_rank, keyword_score=keyword_score,
                            semantic_rank=semantic_rank, semantic_score=semantic_score))
        return hits


def _scored(leg: list[Hit]) -> list[tuple[str, float]]:
    return [(hit.chunk_id, hit.score) for hit in leg]


def _legs(leg: list[Hit]) -> dict[str, tuple[int, float]]:
    """chunk id -> (rank from 1, score) in one leg."""
    return {hit.chunk_id: (rank, hit.score) for rank, hit in enumerate(leg, 1)}
