"""Hybrid search: the fusion functions, the filter arguments, and search_hybrid end to end
on the published sample vault."""

from datetime import datetime

import pytest

from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.hybrid import fuse, reciprocal_rank_fusion, search_filter, weighted_fusion
from jarvis_query.knowledge_base import KnowledgeBase, QueryError

KEYWORD = [("a", 12.0), ("b", 6.0), ("c", 3.0)]
DENSE = [("c", 0.9), ("d", 0.8), ("a", 0.5)]


def test_reciprocal_rank_fusion_rewards_agreement():
    fused = reciprocal_rank_fusion(["a", "b", "c"], ["c", "d", "a"])
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert fused["d"] == pytest.approx(1 / 62)
    assert [item for item, _ in fuse(KEYWORD, DENSE)] == ["a", "c", "b", "d"]
    assert fuse([], []) == []


def test_alpha_weights_the_normalised_legs():
    assert [item for item, _ in fuse(KEYWORD, DENSE, alpha=0)][:3] == ["a", "b", "c"]
    assert [item for item, _ in fuse(KEYWORD, DENSE, alpha=1)][:3] == ["c", "d", "a"]
    half = weighted_fusion(KEYWORD, DENSE, 0.5)
    assert half["a"] == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)
    assert half["c"] == pytest.approx(0.5 * 0.0 + 0.5 * 1.0)
    assert half["d"] == pytest.approx(0.5 * 0.75)
    # ties are broken by id, so equal scores still order deterministically
    assert fuse([("y", 1.0), ("x", 1.0)], [], alpha=0) == [("x", 1.0), ("y", 1.0)]


def test_filter_arguments():
    assert search_filter() is None
    filters = search_filter("work", "note", ["#health", "sleep"], "2026-01-01", "2026-01-31")
    assert filters == VectorFilter(sources=["work"], source_types=["note"],
                                   tags_any=["health", "sleep"],
                                   modified_from=datetime(2026, 1, 1),
                                   modified_to=datetime(2026, 1, 31, 23, 59, 59, 999999))
    assert search_filter(modified_before="2026-01-31T12:00:00").modified_to == \
        datetime(2026, 1, 31, 12)
    for kwargs, message in [
            ({"modified_after": "yesterday"}, "modified_after must be an ISO date"),
            ({"modified_after": "2026-02-01", "modified_before": "2026-01-01"},
             "modified_after must not be later than modified_before"),
            ({"tags": [""]}, "tags must be a list of non-empty strings"),
            ({"source_types": [3]}, "source_types must be a list of non-empty strings")]:
        with pytest.raises(QueryError, match=message):
            search_filter(**kwargs)


@pytest.fixture(scope="module")
def kb(published_sample):
    knowledge_base = KnowledgeBase(published_sample)
    yield knowledge_base
    knowledge_base.close()


@pytest.mark.slow
def test_hybrid_finds_what_either_leg_finds(kb):
    results = kb.search_hybrid("duplicate readings idempotency key", limit=5)
    assert results[0]["path"] in {"Projects/Lumen/Architecture/Ingest API.md",
                                  "Projects/Lumen/Decisions/ADR-002 Idempotent Ingest.md"}
    assert results[0]["keyword_rank"] and results[0]["semantic_rank"]
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    assert all(r["fusion"] == "rrf" for r in results)
    # an exact rare word: keyword-only alpha puts its note first
    [first] = kb.search_hybrid("shakshuka", limit=1, alpha=0)
    assert first["path"] == "Personal/Recipes/Shakshuka.md" and first["fusion"] == "alpha=0"
    semantic = kb.search_hybrid("eggs poached in a spiced tomato sauce", limit=3, alpha=1)
    assert semantic[0]["path"] == "Personal/Recipes/Shakshuka.md"


@pytest.mark.slow
def test_hybrid_filters_apply_to_both_legs(kb):
    tagged = kb.search_hybrid("sleep", limit=20, tags=["health"])
    # the two notes tagged #health (VAULT_FEATURES), found by both legs
    assert {r["path"] for r in tagged} == {"Areas/Health/Sleep.md",
                                           "Reading/Books/Why We Sleep.md"}
    assert any(r["keyword_rank"] for r in tagged) and any(r["semantic_rank"] for r in tagged)
    everything = kb.search_hybrid("sleep", limit=20)
    assert len(everything) > len(tagged)
    assert kb.search_hybrid("sleep", source_types=["ticket"]) == []
    assert kb.search_hybrid("sleep", modified_after="2100-01-01") == []
    recent = kb.search_hybrid("sleep", limit=50, modified_after="2026-11-01")
    with kb.snapshots.current().cursor() as cursor:
        dates = dict(cursor.execute("SELECT path, modified_at FROM notes").fetchall())
    assert all(dates[r["path"]] >= datetime(2026, 11, 1) for r in recent)
    assert recent and any(dates[r["path"]] < datetime(2026, 11, 1)
                          for r in kb.search_hybrid("sleep", limit=50))


@pytest.mark.slow
def test_hybrid_arguments_are_checked(kb):
    for kwargs, message in [({"query": ""}, "query parameter is required"),
                            ({"query": "x", "limit": 51}, "limit must be between 1 and 50"),
                            ({"query": "x", "vault": "nope"}, "Unknown vault 'nope'"),
                            ({"query": "x", "alpha": 1.5}, "alpha must be between 0 and 1"),
                            ({"query": "x", "alpha": True}, "alpha must be between 0 and 1")]:
        with pytest.raises(QueryError, match=message):
            kb.search_hybrid(**kwargs)
