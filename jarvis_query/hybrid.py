"""Hybrid search: BM25 and dense results fused, with the same filters on both legs.

Fusion is reciprocal rank fusion by default (k = 60, as in Cormack et al. 2009): it needs
no score calibration between BM25 (unbounded) and cosine (bounded), and on SciFact it beats
both legs. ``alpha`` switches to a weighted sum of min-max normalised scores,
alpha * dense + (1 - alpha) * keyword: 0 is keyword only, 1 vector only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.keyword import check_query, keyword_searcher
from jarvis_query.knowledge_base import KnowledgeBase, QueryError
from jarvis_query.snapshot import Snapshot

RRF_K = 60
CANDIDATES = 100  # chunks fetched from each leg before fusing


def reciprocal_rank_fusion(*rankings: Sequence[str], k: int = RRF_K) -> dict[str, float]:
    """id -> sum over the rankings holding it of 1 / (k + rank), ranks from 1."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


def _normalised(scored: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Min-max to [0, 1]; a single (or all-equal) list scores 1."""
    if not scored:
        return {}
    low, high = min(s for _, s in scored), max(s for _, s in scored)
    return {item: (s - low) / (high - low) if high > low else 1.0 for item, s in scored}


def weighted_fusion(keyword: Sequence[tuple[str, float]], dense: Sequence[tuple[str, float]],
                    alpha: float) -> dict[str, float]:
    """alpha * normalised dense + (1 - alpha) * normalised keyword; absent from a leg is 0."""
    keyword_scores, dense_scores = _normalised(keyword), _normalised(dense)
    return {item: alpha * dense_scores.get(item, 0.0)
            + (1 - alpha) * keyword_scores.get(item, 0.0)
            for item in keyword_scores.keys() | dense_scores.keys()}


def fuse(keyword: Sequence[tuple[str, float]], dense: Sequence[tuple[str, float]],
         alpha: float | None = None) -> list[tuple[str, float]]:
    """Both legs' (id, score) lists, best first, fused; best first, ties by id."""
    fused = (reciprocal_rank_fusion([i for i, _ in keyword], [i for i, _ in dense])
             if alpha is None else weighted_fusion(keyword, dense, alpha))
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


@dataclass(frozen=True)
class HybridHits:
    """Fused chunk ids with each leg's rank and score (None: not found by that leg)."""

    fused: list[tuple[str, float]]
    keyword: dict[str, tuple[int, float]]
    semantic: dict[str, tuple[int, float]]


def _timestamp(value: str | date | datetime | None, name: str, end_of_day: bool
               ) -> datetime | None:
    """A bound from a datetime, a date or an ISO string; a bare date means the start of the
    day, or its end for an upper bound."""
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise QueryError(f"{name} must be an ISO date or date-time, got '{value}'") from None
        if "T" in value or " " in value.strip():
            return parsed
        value = parsed.date()
    if isinstance(value, date):
        return datetime.combine(value, time.max if end_of_day else time.min)
    raise QueryError(f"{name} must be an ISO date or date-time, got '{value}'")


def _names(values: str | Sequence[str] | None, name: str) -> list[str] | None:
    if values is None:
        return None
    values = [values] if isinstance(values, str) else list(values)
    if not all(isinstance(v, str) and v.strip() for v in values):
        raise QueryError(f"{name} must be a list of non-empty strings")
    return values


def search_filter(vault: str | None = None, source_types: str | Sequence[str] | None = None,
                  tags: str | Sequence[str] | None = None,
                  modified_after: str | date | datetime | None = None,
                  modified_before: str | date | datetime | None = None) -> VectorFilter | None:
    """The filter both legs apply (bounds inclusive, naive times UTC); None when empty."""
    start = _timestamp(modified_after, "modified_after", end_of_day=False)
    end = _timestamp(modified_before, "modified_before", end_of_day=True)
    if start and end and _utc_naive(start) > _utc_naive(end):
        raise QueryError("modified_after must not be later than modified_before")
    tag_list = _names(tags, "tags")
    filters = VectorFilter(sources=[vault] if vault else None,
                           source_types=_names(source_types, "source_types"),
                           tags_any=[t.lstrip("#") for t in tag_list] if tag_list else tag_list,
                           modified_from=start, modified_to=end)
    return None if filters == VectorFilter() else filters


def _utc_naive(value: datetime) -> datetime:
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def hybrid_hits(kb: KnowledgeBase, snapshot: Snapshot, query: str,
                filters: VectorFilter | None, alpha: float | None = None,
                candidates: int = CANDIDATES) -> HybridHits:
    """Both legs over ``candidates`` chunks each, fused (all of them, best first)."""
    keyword = [(hit.chunk_id, hit.score)
               for hit in keyword_searcher(snapshot).search(query, candidates, filters)]
    vector = kb.embed_query(snapshot.model, query)
    dense = [(hit.chunk_id, hit.score)
             for hit in snapshot.vectors.search(vector, limit=candidates, filters=filters)]
    return HybridHits(fuse(keyword, dense, alpha),
                      {c: (rank, s) for rank, (c, s) in enumerate(keyword, 1)},
                      {c: (rank, s) for rank, (c, s) in enumerate(dense, 1)})


def check_alpha(alpha: float | None) -> None:
    if alpha is not None and (isinstance(alpha, bool) or not isinstance(alpha, int | float)
                              or not 0 <= alpha <= 1):
        raise QueryError("alpha must be between 0 and 1")


def search_hybrid(kb: KnowledgeBase, query: str, limit: int = 10, vault: str | None = None,
                  alpha: float | None = None, source_types: Sequence[str] | None = None,
                  tags: Sequence[str] | None = None,
                  modified_after: str | date | datetime | None = None,
                  modified_before: str | date | datetime | None = None) -> list[dict]:
    """Chunks ranked by fused keyword and semantic relevance, best first; each result says
    its rank and score in either leg (None where that leg did not find it)."""
    check_query(kb, query, limit, vault)
    check_alpha(alpha)
    filters = search_filter(vault, source_types, tags, modified_after, modified_before)
    snapshot = kb.snapshots.current()
    hits = hybrid_hits(kb, snapshot, query, filters, alpha)
    results = KnowledgeBase._results(snapshot, hits.fused[:limit])
    return [{**result.as_dict(), "fusion": "rrf" if alpha is None else f"alpha={alpha}",
             "keyword_rank": hits.keyword.get(result.chunk_id, (None, None))[0],
             "keyword_score": _rounded(hits.keyword.get(result.chunk_id, (None, None))[1]),
             "semantic_rank": hits.semantic.get(result.chunk_id, (None, None))[0],
             "semantic_score": _rounded(hits.semantic.get(result.chunk_id, (None, None))[1])}
            for result in results]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)
