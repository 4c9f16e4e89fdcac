"""Hybrid retrieval: a keyword and a dense retriever over the same filters, fused
(jarvis_query/fusion.py: reciprocal rank fusion, or weighted by ``alpha``). A version whose
embeddings are still being made (published early) has the keyword leg alone."""

from __future__ import annotations

from dataclasses import dataclass

from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.fusion import fuse
from jarvis_query.retrievers.base import Retriever, ScoredChunks
from jarvis_query.snapshot import Snapshot

CANDIDATES = 100  # chunks fetched from each leg before fusing


@dataclass(frozen=True)
class HybridHits:
    """Fused chunk ids with each leg's rank and score (absent: not found by that leg)."""

    fused: ScoredChunks
    keyword: dict[str, tuple[int, float]]
    semantic: dict[str, tuple[int, float]]


class HybridRetriever:
    def __init__(self, keyword: Retriever, dense: Retriever) -> None:
        self.keyword = keyword
        self.dense = dense

    def hits(self, snapshot: Snapshot, query: str, filters: VectorFilter | None = None,
             alpha: float | None = None, candidates: int = CANDIDATES) -> HybridHits:
        """Both legs over ``candidates`` chunks each, fused (all of them, best first)."""
        keyword = self.keyword.retrieve(snapshot, query, candidates, filters)
        if snapshot.embeddings["complete"]:
            dense = self.dense.retrieve(snapshot, query, candidates, filters)
        else:
            dense, alpha = [], None  # a weight on an empty leg would only flatten the scores
        return HybridHits(fuse(keyword, dense, alpha),
                          {c: (rank, s) for rank, (c, s) in enumerate(keyword, 1)},
                          {c: (rank, s) for rank, (c, s) in enumerate(dense, 1)})

    def retrieve(self, snapshot: Snapshot, query: str, limit: int,
                 filters: VectorFilter | None = None) -> ScoredChunks:
        return self.hits(snapshot, query, filters).fused[:limit]
