"""Fusing two rankings of the same items (keyword and dense search results).

Reciprocal rank fusion (k = 60, as in Cormack et al. 2009) is the default: it needs no
score calibration between BM25 (unbounded) and cosine (bounded), and on SciFact it beats
both legs. ``alpha`` switches to a weighted sum of min-max normalised scores,
alpha * dense + (1 - alpha) * keyword: 0 is keyword only, 1 dense only.
"""

from __future__ import annotations

from collections.abc import Sequence

RRF_K = 60

Scored = Sequence[tuple[str, float]]


def reciprocal_rank_fusion(*rankings: Sequence[str], k: int = RRF_K) -> dict[str, float]:
    """id -> sum over the rankings holding it of 1 / (k + rank), ranks from 1."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


def min_max(scored: Scored) -> dict[str, float]:
    """Scores scaled to [0, 1]; a single (or all-equal) list scores 1."""
    if not scored:
        return {}
    low, high = min(s for _, s in scored), max(s for _, s in scored)
    return {item: (s - low) / (high - low) if high > low else 1.0 for item, s in scored}


def weighted_fusion(keyword: Scored, dense: Scored, alpha: float) -> dict[str, float]:
    """alpha * normalised dense + (1 - alpha) * normalised keyword; absent from a leg is 0."""
    keyword_scores, dense_scores = min_max(keyword), min_max(dense)
    return {item: alpha * dense_scores.get(item, 0.0)
            + (1 - alpha) * keyword_scores.get(item, 0.0)
            for item in keyword_scores.keys() | dense_scores.keys()}


def fuse(keyword: Scored, dense: Scored, alpha: float | None = None) -> list[tuple[str, float]]:
    """Both legs' (id, score) lists, best first, fused; best first, ties by id."""
    fused = (reciprocal_rank_fusion([i for i, _ in keyword], [i for i, _ in dense])
             if alpha is None else weighted_fusion(keyword, dense, alpha))
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
