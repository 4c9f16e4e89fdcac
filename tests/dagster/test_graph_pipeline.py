"""The graph layer end to end: tables, the embedded graph store, renames and deletions,
and graph search through the published version."""

import pytest

from jarvis_core.stores import serving
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_pipeline.refresh import run_refresh
from jarvis_query.knowledge_base import KnowledgeBase, QueryError
from tests.pipeline_helpers import rows, write_config

ALERTING = "note:sample/Projects/Lumen/Architecture/Alerting.md"


def graph_keys(config) -> tuple[set[str], set[tuple[str, str, str]]]:
    with SqliteGraphStore(config.graph_path) as store:
        nodes = store.document_keys("sample")
        edges = {(e.src, e.relation, e.dst)
                 for e in store.neighbourhood(ALERTING, 3, limit=100_000).edges}
    return nodes, edges


def test_tables_and_store_agree(published_sample):
    config = published_sample  # read only: the sample as the session refreshed it
    table_notes = {k for (k,) in rows(config, "SELECT node_key FROM graph_nodes "
                                              "WHERE type = 'note'")}
    with SqliteGraphStore.open_read_only(config.graph_path) as store:
        assert store.document_keys("sample") == table_notes
        assert store.dangling_edges() == 0
        store_edges = sum(store.counts()["edges"].values())
    assert store_edges == rows(config, "SELECT count(*) FROM graph_edges")[0][0]
    broken = {(o.rsplit("/", 1)[-1], t, r) for o, t, r in rows(
        config, "SELECT origin, target, reason FROM graph_broken_links")}
    assert "ambiguous" not in {reason for _, _, reason in broken}  # [[Retro]]: Obsidian's pick
    unresolved = [b for b in broken if b[2] == "unresolved"]
    assert len(unresolved) == 5 and len({target for _, target, _ in unresolved}) == 4


def test_rename_and_delete_leave_nothing_stale(sample_copy):
    config = sample_copy
    sample_vault = config.sources["sample"].path
    (sample_vault / "Projects/Lumen/Architecture/Alerting.md").rename(
        sample_vault / "Projects/Lumen/Architecture/Alerting Service.md")
    (sample_vault / "Personal/Recipes/Shakshuka.md").unlink()
    report = run_refresh(config)
    assert report["ok"], report
    renamed = "note:sample/Projects/Lumen/Architecture/Alerting Service.md"
    with SqliteGraphStore(config.graph_path) as store:
        keys = store.document_keys("sample")
        assert ALERTING not in keys and renamed in keys
        assert not [k for k in keys if "Shakshuka" in k]
        assert store.node(ALERTING) is None and store.dangling_edges() == 0
    for table, column in (("graph_nodes", "node_key"), ("graph_edges", "src"),
                          ("graph_edges", "dst"), ("chunk_mentions", "node_key")):
        assert rows(config, f"SELECT count(*) FROM {table} WHERE {column} = ? "
                            f"OR {column} LIKE '%Shakshuka%'", [ALERTING]) == [(0,)], table
    # links written as [[Alerting]] no longer resolve: they are broken links now
    assert rows(config, "SELECT count(*) > 0 FROM graph_broken_links WHERE target = 'Alerting'"
                ) == [(True,)]


def test_unchanged_refresh_rewrites_no_subgraph(sample_copy):
    sample_config = sample_copy
    assert run_refresh(sample_config)["sources"] == []  # nothing changed: nothing runs
    report = run_refresh(sample_config, only=["sample"])  # run anyway: nothing rewritten
    [source] = report["sources"]
    graph = source["layers"]["knowledge_graph"]
    assert (graph["new"], graph["changed"], graph["deleted"]) == (0, 0, 0)


def test_graph_search_at_every_depth(kb):
    previous = 0
    for depth in (1, 2, 3):
        result = kb.search_graph("Projects/Lumen/Architecture/Alerting.md", depth=depth)
        assert result["available"] and result["center"]["key"] == ALERTING
        assert result == kb.search_graph("Alerting", depth=depth)  # title, same order
        assert result["counts"]["notes"] >= previous
        previous = result["counts"]["notes"]
        assert result["notes"] and all(n["distance"] <= depth for n in result["notes"])
    depth_one = kb.search_graph("sample/Projects/Lumen/Architecture/Alerting", depth=1)
    owned = depth_one["relationships"]["OWNED_BY"]
    assert {"src_title": "Alerting", "dst_title": "Maya Chen"}.items() <= owned[0].items()
    assert owned[0]["evidence"] and "OWNED_BY" in owned[0]["evidence_text"]
    for bad, message in ((0, "depth must be between 1 and 3"),
                         (4, "depth must be between 1 and 3")):
        with pytest.raises(QueryError, match=message):
            kb.search_graph("Alerting", depth=bad)
    with pytest.raises(QueryError, match="names no document in the sources you can read"):
        kb.search_graph("No Such Note")
    with pytest.raises(QueryError, match="names several documents"):
        kb.search_graph("Retro")


def test_graph_unavailable_falls_back_to_semantic_search(sample_copy):
    version = serving.current_version(sample_copy.data_dir)
    version.graph_path.unlink()
    kb = KnowledgeBase(sample_copy)
    try:
        result = kb.search_graph("Alerting")
        assert not result["available"]
        assert result["message"].startswith("Graph search is currently unavailable: ")
        assert result["fallback"] and result["fallback"][0].path.endswith("Alerting.md")
    finally:
        kb.close()


def test_similarity_edges_when_enabled(sample_copy):
    """Turned on in a copy of the published sample: the refresh infers them for every note."""
    config = write_config(sample_copy.config_path.parent,
                          {"sample": sample_copy.sources["sample"].path},
                          graph={"similarity_top_k": 3, "similarity_threshold": 0.6})
    assert run_refresh(config)["ok"]
    similar = rows(config, "SELECT src, dst, weight, confidence, extractor FROM graph_edges "
                           "WHERE relation = 'SIMILAR_TO'")
    assert similar
    assert all(src < dst and weight >= 0.6 and (confidence, extractor) == ("inferred",
               "similarity") for src, dst, weight, confidence, extractor in similar)
    again = run_refresh(config, only=["sample"])["sources"][0]["layers"]["knowledge_graph"]
    assert (again["new"], again["changed"]) == (0, 0)  # stable similarities rewrite nothing
