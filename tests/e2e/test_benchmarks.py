"""The benchmark commands run and print their figures (small sizes: speed goals are read
from the full runs quoted in the README, never asserted here)."""

import json

from click.testing import CliRunner

import jarvis_bench.search
from jarvis_cli.main import cli

# The real embeddings the search benchmarks spread their corpus around: 256 by default, whose
# embedding (once per test run, the vector cache being the session's) cost 8 CPU-s; how many
# there are shows in no figure.
SEED_CHUNKS = 16


def run_json(*args: str) -> dict:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_bench_graph_prints_latencies():
    data = run_json("bench", "graph", "--notes", "300", "--json")
    assert data["notes"] == 300 and data["edges"] > 300
    for depth in ("depth_1", "depth_2", "depth_3"):
        assert data["neighbourhood"][depth]["p50_ms"] > 0
    assert data["graph_search_depth_2"]["p95_ms"] >= data["graph_search_depth_2"]["p50_ms"]


def test_bench_search_prints_latencies(sample_config, monkeypatch):
    monkeypatch.setattr(jarvis_bench.search, "SEED_CHUNKS", SEED_CHUNKS)
    data = run_json("--config", str(sample_config.config_path), "bench", "search",
                    "--sizes", "500", "--json")
    figures = data["sizes"]["500"]
    assert 0 < figures["p50_ms"] <= figures["p95_ms"]
    assert data["queries"] == 100
    assert data["query_encoder"] == "exported query model"  # what servers encode with
