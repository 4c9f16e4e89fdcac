"""``jarvis bench query`` on a small corpus: every tool is timed through the real query path
and the figures come back in the documented shape."""

import json

import pytest
from click.testing import CliRunner

import jarvis_bench.query
from jarvis_cli.main import cli
from tests.pipeline_helpers import write_config


@pytest.mark.slow
def test_bench_query_times_every_tool(tmp_path, sample_vault, monkeypatch):
    # the real embeddings the corpus vectors are spread around: 256 by default, whose
    # embedding (once per test run) cost 8 CPU-s; how many there are shows in no figure
    monkeypatch.setattr(jarvis_bench.query, "SEED_CHUNKS", 16)
    config = write_config(tmp_path / "project", {"sample": sample_vault})
    result = CliRunner().invoke(cli, ["--config", str(config.config_path), "bench", "query",
                                      "--chunks", "1000", "--queries", "5", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["chunks"], data["notes"], data["queries"]) == (1000, 200, 5)
    assert data["query_encoder"] == "exported query model"  # what servers encode with
    assert set(data["tools"]) == {"keyword", "keyword_names", "semantic", "hybrid",
                                  "graph_depth_2", "graphrag"}
    for figures in data["tools"].values():
        assert 0 < figures["p50_ms"] <= figures["p95_ms"]
    assert data["tools"]["graphrag"]["goal_p50_ms"] == 300
    small = CliRunner().invoke(cli, ["--config", str(config.config_path), "bench", "query",
                                     "--chunks", "10"])
    assert small.exit_code != 0 and "--chunks: at least 1000" in small.output
    many = CliRunner().invoke(cli, ["--config", str(config.config_path), "bench", "query",
                                    "--chunks", "1000", "--queries", "201"])
    assert many.exit_code != 0 and "--queries: between 1 and one per note (200)" in many.output


@pytest.mark.slow
def test_bench_identifiers_finds_every_named_item_first(published_project):
    result = CliRunner().invoke(cli, ["--config", str(published_project.config_path), "bench",
                                      "identifiers", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["identifiers"]) == {"ticket", "commit", "email", "page"}
    assert data["queries"] == sum(data["identifiers"].values()) and data["embeddings"]["complete"]
    assert set(data["modes"]) == {"keyword", "keyword_content", "semantic", "hybrid"}
    for figures in data["modes"].values():
        assert (figures["first"], figures["misses"]) == (1.0, []), figures["misses"]
        assert figures["found_first"] == data["queries"]
        assert 0 < figures["p50_ms"] <= figures["p95_ms"]
    assert (data["goal_first"], data["goal_p50_ms"]) == (1.0, 50)
