"""GraphRAG evidence packs on the published sample vault: ranking and its components, the
subgraph, evidence, the token budget, a missing graph, and argument errors."""


import pytest

from jarvis_core.stores import serving
from jarvis_core.text.tokens import TokenCounter, token_counter
from jarvis_query.graphrag import WEIGHTS, _context_block
from jarvis_query.knowledge_base import KnowledgeBase, QueryError
from tests.pipeline_helpers import copy_data, write_config


@pytest.fixture(scope="module")
def pack(kb):
    return kb.search_graphrag("how does Lumen alerting work", limit=6, depth=1)


@pytest.mark.slow
def test_sources_are_ranked_by_the_documented_weighted_sum(pack):
    sources = pack["sources"]
    assert len(sources) == 6 and pack["graph_available"]
    assert [s["rank"] for s in sources] == list(range(1, 7))
    assert [s["score"] for s in sources] == sorted((s["score"] for s in sources), reverse=True)
    for source in sources:
        parts = source["components"]
        assert set(parts) == set(WEIGHTS) and all(0 <= v <= 1 for v in parts.values())
        assert source["score"] == pytest.approx(sum(WEIGHTS[n] * parts[n] for n in WEIGHTS),
                                                abs=1e-3)
        assert source["text"] and source["chunk_ids"]
    assert "Projects/Lumen/Architecture/Alerting.md" in [s["path"] for s in sources[:3]]


@pytest.mark.slow
def test_evidence_and_subgraph_link_the_sources(pack):
    keys = {s["key"] for s in pack["sources"]}
    nodes = {n["key"] for n in pack["subgraph"]["nodes"]}
    assert keys <= nodes
    assert all(e["src"] in nodes and e["dst"] in nodes for e in pack["subgraph"]["edges"])
    bridges = nodes - keys  # e.g. a tag two sources share: each touches two sources
    for bridge in bridges:
        touched = {e["dst"] if e["src"] == bridge else e["src"]
                   for e in pack["subgraph"]["edges"] if bridge in (e["src"], e["dst"])}
        assert len(touched & keys) >= 2
    linked = [s for s in pack["sources"] if s["evidence"]]
    assert linked, "the Lumen notes link to each other"
    for source in linked:
        for evidence in source["evidence"]:
            assert evidence["other"] in keys and evidence["evidence_text"]
    # the chunks that hold a link (frontmatter links sit in no chunk)
    assert any(e["chunk_ids"] for s in linked for e in s["evidence"])


@pytest.mark.slow
def test_context_block_fits_the_token_budget(kb, pack, published_sample):
    counter = token_counter(published_sample.embedding.model)
    assert pack["max_tokens"] == 6500
    assert pack["tokens"] == counter.count([pack["context"]])[0] <= 6500
    assert pack["context"].startswith("Evidence for: how does Lumen alerting work")
    assert f"[1] {pack['sources'][0]['title']}" in pack["context"]
    small = kb.search_graphrag("how does Lumen alerting work", limit=6, max_tokens=300)
    assert small["truncated"] and small["tokens"] <= 300
    assert counter.count([small["context"]])[0] == small["tokens"]
    deeper = kb.search_graphrag("how does Lumen alerting work", limit=6, depth=2)
    assert len(deeper["subgraph"]["nodes"]) >= len(pack["subgraph"]["nodes"])


def test_a_context_block_tokenizes_little_more_than_its_budget(monkeypatch):
    """Relationships five times the budget: the block is exact, and what is tokenized to make
    it is about the budget, not everything offered."""
    counter = token_counter("all-MiniLM-L6-v2")
    sources = [{"rank": rank, "title": f"Note {rank}", "vault": "v", "path": f"n{rank}.md",
                "score": 0.5, "text": "The rain gauge at the ridge station was recalibrated."}
               for rank in range(1, 4)]
    edges = [{"src": f"n{i}", "relation": "LINKS_TO", "dst": f"n{i + 1}",
              "evidence_text": f"See [[n{i + 1}]] for the calibration log of station {i}."}
             for i in range(3000)]
    tokenized = []
    for method in ("count", "offsets"):
        original = getattr(TokenCounter, method)
        monkeypatch.setattr(TokenCounter, method, lambda self, texts, original=original: (
            tokenized.append(len("".join(texts))) or original(self, texts)))
    text, tokens, truncated = _context_block("gauge", sources, {"nodes": [], "edges": edges},
                                             counter, 2000)
    monkeypatch.undo()
    offered = sum(len(edge["evidence_text"]) for edge in edges)
    assert truncated and tokens == counter.count([text])[0] <= 2000
    assert sum(tokenized) < 3 * len(text) < offered


@pytest.mark.slow
def test_graph_found_neighbours_join_the_pack(kb):
    found = kb.search_graphrag("poached eggs recipe", limit=10, depth=1)
    assert found["sources"][0]["path"] == "Personal/Recipes/Shakshuka.md"
    assert {s["found_by"] for s in found["sources"]} == {"search", "graph"}
    for source in found["sources"]:
        if source["found_by"] == "graph":
            assert source["components"]["semantic"] == 0 and source["components"]["graph"] > 0


@pytest.mark.slow
def test_without_a_graph_the_pack_still_has_ranked_sources(published_sample, tmp_path):
    copy_data(published_sample.data_dir, tmp_path / "data")
    config = write_config(tmp_path, {"sample": published_sample.sources["sample"].path})
    serving.current_version(config.data_dir).graph_path.unlink()
    kb = KnowledgeBase(config)
    try:
        pack = kb.search_graphrag("sleep", limit=3)
    finally:
        kb.close()
    assert not pack["graph_available"]
    assert pack["graph_message"].startswith("Graph search is currently unavailable")
    assert len(pack["sources"]) == 3 and pack["subgraph"]["edges"] == []


@pytest.mark.slow
def test_graphrag_arguments_are_checked(kb):
    for kwargs, message in [({"query": " "}, "query parameter is required"),
                            ({"query": "x", "limit": 0}, "limit must be between 1 and 50"),
                            ({"query": "x", "vault": "nope"}, "Unknown vault 'nope'"),
                            ({"query": "x", "depth": 4}, "depth must be between 1 and 3"),
                            ({"query": "x", "max_tokens": 10},
                             "max_tokens must be between 200 and 100000")]:
        with pytest.raises(QueryError, match=message):
            kb.search_graphrag(**kwargs)
