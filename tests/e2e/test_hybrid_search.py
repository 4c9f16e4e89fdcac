"""Hybrid search end to end on the published sample vault: both legs, their filters, and
argument errors (the fusion functions and the filter arguments: tests/unit)."""

import re
from datetime import datetime

import pytest

from jarvis_query.knowledge_base import QueryError
from jarvis_query.snapshot import Snapshot


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


class _RecordedCursor:
    """A snapshot cursor that keeps the statements it runs."""

    def __init__(self, cursor, statements: list[str]) -> None:
        self._cursor, self._statements = cursor, statements

    def execute(self, statement: str, *args):
        self._statements.append(statement)
        return self._cursor.execute(statement, *args)

    def __getattr__(self, name: str):
        return getattr(self._cursor, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self._cursor.close()


@pytest.mark.slow
def test_candidates_are_grouped_by_document_without_reading_their_chunk_rows(kb, monkeypatch):
    """Each leg knows its chunks' documents (the vector payload and the keyword index keep
    them), so of the two hundred candidates only the hits shown are read from the chunk
    table: that lookup was most of a search's time at a million chunks."""
    statements: list[str] = []
    cursor = Snapshot.cursor
    monkeypatch.setattr(Snapshot, "cursor",
                        lambda snapshot: _RecordedCursor(cursor(snapshot), statements))
    for search in (kb.search_hybrid, kb.search_semantic):
        statements.clear()
        hits = search("sleep and health habits", limit=3)
        assert len(hits) == 3 and all(hit.vault and hit.path for hit in hits)
        read = {chunk_id for statement in statements if "FROM chunks" in statement
                for chunk_id in re.findall(r"'([0-9a-f]{16,})'", statement)}
        assert read <= {hit.chunk_id for hit in hits}, search.__name__
