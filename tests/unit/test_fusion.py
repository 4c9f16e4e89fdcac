"""Fusing keyword and dense rankings: reciprocal rank fusion and alpha-weighted scores."""

import pytest

from jarvis_query.fusion import fuse, min_max, reciprocal_rank_fusion, weighted_fusion

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


def test_min_max_keeps_the_order_and_scores_a_flat_list_one():
    assert list(min_max([("b", 4.0), ("a", 2.0), ("c", 3.0)]).items()) == [
        ("b", 1.0), ("a", 0.0), ("c", 0.5)]
    assert min_max([("x", 0.2), ("y", 0.2)]) == {"x": 1.0, "y": 1.0}
    assert min_max([]) == {}
