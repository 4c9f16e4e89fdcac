"""Hybrid search end to end on the published sample vault: both legs, their filters, and
argument errors (the fusion functions and the filter arguments: tests/unit)."""

from datetime import datetime

import pytest

from jarvis_query.knowledge_base import QueryError


@pytest.mark.slow
def test_hybrid_finds_what_either_leg_finds(kb):
    results = kb.search_hybrid("duplicate readings idempotency key", limit=5)
    assert results[0].path in {"Projects/Lumen/Architecture/Ingest API.md",
                               "Projects/Lumen/Decisions/ADR-002 Idempotent Ingest.md"}
    assert results[0].keyword_rank and results[0].semantic_rank
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert all(r.fusion == "rrf" for r in results)
    # an exact rare word: keyword-only alpha puts its note first
    [first] = kb.search_hybrid("shakshuka", limit=1, alpha=0)
    assert first.path == "Personal/Recipes/Shakshuka.md" and first.fusion == "alpha=0"
    semantic = kb.search_hybrid("eggs poached in a spiced tomato sauce", limit=3, alpha=1)
    assert semantic[0].path == "Personal/Recipes/Shakshuka.md"


@pytest.mark.slow
def test_hybrid_filters_apply_to_both_legs(kb):
    tagged = kb.search_hybrid("sleep", limit=20, tags=["health"])
    # the two notes tagged #health (VAULT_FEATURES), found by both legs
    assert {r.path for r in tagged} == {"Areas/Health/Sleep.md",
                                        "Reading/Books/Why We Sleep.md"}
    assert any(r.keyword_rank for r in tagged) and any(r.semantic_rank for r in tagged)
    everything = kb.search_hybrid("sleep", limit=20)
    assert len(everything) > len(tagged)
    assert kb.search_hybrid("sleep", source_types=["ticket"]) == []
    assert kb.search_hybrid("sleep", modified_after="2100-01-01") == []
    recent = kb.search_hybrid("sleep", limit=50, modified_after="2026-11-01")
    with kb.snapshots.current().cursor() as cursor:
        dates = dict(cursor.execute("SELECT path, modified_at FROM notes").fetchall())
    assert all(dates[r.path] >= datetime(2026, 11, 1) for r in recent)
    assert recent and any(dates[r.path] < datetime(2026, 11, 1)
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
