"""Recall's score (the seed's 0.4 relevance, 0.3 recency, 0.2 frequency, 0.1 importance) and
the documents the access log takes from each kind of answer."""

import math
from datetime import UTC, datetime, timedelta

import pytest

from jarvis_core.memory import Memory
from jarvis_query.access_log import documents_of
from jarvis_query.memory import FREQUENCY_SATURATION, WEIGHTS, score_components

NOW = datetime(2026, 3, 1, tzinfo=UTC)


def memory(age_days: float | None, importance: float) -> Memory:
    created = NOW - timedelta(days=age_days) if age_days is not None else None
    return Memory("mem", "Memories/x.md", "abc123", "x", created, importance, (), None, None,
                  False, "text")


def test_the_weights_are_the_seeds():
    assert WEIGHTS == {"relevance": 0.4, "recency": 0.3, "frequency": 0.2, "importance": 0.1}


@pytest.mark.parametrize("age, uses, importance, relevance", [
    (0, 0, 0.5, 1.0), (30, 1, 0.9, 0.25), (90, FREQUENCY_SATURATION, 0.0, 0.0),
    (None, 50, 1.0, 0.6)])
def test_each_component_and_the_total(age, uses, importance, relevance):
    parts = score_components(memory(age, importance), relevance, uses, NOW, half_life_days=30)
    recency = 0.5 ** (age / 30) if age is not None else 0.0
    frequency = min(1.0, math.log1p(uses) / math.log1p(FREQUENCY_SATURATION))
    assert parts["relevance"] == pytest.approx(relevance, abs=1e-4)
    assert parts["recency"] == pytest.approx(recency, abs=1e-4)
    assert parts["frequency"] == pytest.approx(frequency, abs=1e-4)
    assert parts["importance"] == importance
    assert parts["total"] == pytest.approx(
        0.4 * relevance + 0.3 * recency + 0.2 * frequency + 0.1 * importance, abs=1e-3)


def test_documents_are_taken_from_every_kind_of_answer():
    hit = {"vault": "v", "path": "a.md"}
    assert documents_of({"results": [hit, {"vault": "v", "path": "b.md"}, hit]}) == [
        "v/a.md", "v/b.md"]
    assert documents_of([hit]) == ["v/a.md"]
    assert documents_of({"content": "text", **hit, "links": [{"vault": "v", "path": "z"}]}
                        ) == ["v/a.md"]  # what was read, not what it links to
    assert documents_of({"available": True, "vault": "v", "path": "c.md",
                         "notes": [{"key": "note:v/d.md"}, {"key": "ticket:LUM-4"}]}) == [
        "v/c.md", "v/d.md", "ticket:LUM-4"]
    assert documents_of({"sources": [hit], "subgraph": {"nodes": []}}) == ["v/a.md"]
    assert documents_of({"forgotten": hit, "archived_to": {"vault": "v", "path": "A/a.md"}}
                        ) == ["v/a.md", "v/A/a.md"]
    assert documents_of({"vaults": [{"name": "v", "path": "/home/me/v"}]}) == []
