"""The readable text of query answers, shared by the CLI and the MCP tools."""

from jarvis_query.render import (
    render_graph,
    render_notifications,
    render_results,
    render_status,
    render_vault_context,
    table,
)
from jarvis_query.results import Hit


def hit(path: str, score: float, **extra) -> Hit:
    return Hit(path=path, vault="notes", score=score, **extra)


def edge(src: str, dst: str) -> dict:
    return {"src": f"note:{src}", "dst": f"note:{dst}", "src_title": src, "dst_title": dst,
            "evidence": [], "evidence_text": "", "extractor": "links", "confidence": 1.0}


def test_results_rank_score_place_and_the_legs_of_a_hybrid_hit():
    text = render_results({"query": "sleep", "results": [
        hit("Sleep.md", 0.0325, heading="Hours", snippet="Adults need seven hours.",
            fusion="rrf", keyword_rank=1, semantic_rank=None)]})
    assert text.splitlines() == ["1 result for 'sleep'",
                                 " 1. 0.0325  notes/Sleep.md › Hours  (keyword #1, semantic #–)",
                                 "    Adults need seven hours."]
    assert render_results({"query": "zzz", "results": []}) == "no results for 'zzz'"


def test_graph_groups_repeated_pairs_with_a_count():
    edges = [edge("Ingest API", "TimescaleDB"), edge("Ingest API", "TimescaleDB"),
             edge("Alerting", "Ingest API")]
    text = render_graph({
        "available": True, "vault": "notes", "path": "Alerting.md", "depth": 1,
        "center": {"title": "Alerting"},
        "counts": {"notes": 2, "tags": 0, "links": 0, "relationships": 3,
                   "by_relation": {"DEPENDS_ON": 3}},
        "relationships": {"DEPENDS_ON": edges},
        "notes": [{"title": "Ingest API", "distance": 1, "tags": ["lumen"]}]})
    lines = text.splitlines()
    assert lines[0] == "Alerting (notes/Alerting.md), depth 1: 2 notes, 0 tags, 0 links, " \
                       "3 relationships"
    assert "DEPENDS_ON (3)" in lines
    assert lines.count("  Ingest API → TimescaleDB  ×2") == 1
    assert "  Alerting → Ingest API" in lines
    assert "  [1] Ingest API  #lumen" in lines


def test_graph_lists_at_most_twenty_pairs_per_relation():
    edges = [edge(f"Note {n}", "Hub") for n in range(25)]
    text = render_graph({"available": True, "vault": "notes", "path": "Hub.md", "depth": 1,
                         "center": {"title": "Hub"}, "counts": {"notes": 25},
                         "relationships": {"LINKS_TO": edges}, "notes": []})
    assert "  … 5 more pairs" in text and text.count(" → Hub") == 20


def test_unavailable_graph_shows_why_and_the_semantic_fallback():
    text = render_graph({"available": False, "message": "Graph search is currently "
                                                        "unavailable: no graph",
                         "fallback": [hit("Alerting.md", 0.61)]})
    assert text.splitlines() == ["Graph search is currently unavailable: no graph",
                                 "semantic results instead:", " 1. 0.6100  notes/Alerting.md"]


def repository_context(cross_source: dict) -> dict:
    zero = {name: 0 for name in ("notes", "words", "links", "orphans", "dead_ends",
                                 "broken_links", "stale_notes", "communities", "tags",
                                 "broken_targets")}
    return {"vault": "lumen", "kind": "repo", "snapshot_id": "20261124T081728Z",
            "generated_at": "2026-11-24T08:17:28", "is_stale": False, "published_hash": "ab",
            "cache_hit": False, "changes": {"notes": 0},
            "summary": {**zero, "modularity": 0.0, "mean_quality": 0.0},
            "trend": [{"generated_at": "2026-11-24T08:17:28", **zero}],
            "figures": {"cross_source": cross_source}}


def test_a_repository_context_shows_its_figures_readably():
    text = render_vault_context(repository_context({
        "commits_per_author": [{"author": "Maya Chen", "commits": 8},
                               {"author": "Sam Novak", "commits": 4}],
        "tickets_by_status": {"Done": 7, "Blocked": 1},
        "notes_linked_to_code": {"count": 3, "notes": [{"path": "Lumen.md", "code_nodes": 2}]},
    }))
    lines = text.splitlines()
    assert lines[0] == "lumen (repository): snapshot 20261124T081728Z of 2026-11-24T08:17 UTC, " \
                       "fresh"
    assert "0 notes" not in text and "{" not in text and "trend" not in text
    assert "commits per author (2):" in lines and "tickets by status: Done 7, Blocked 1" in lines
    assert any(line.split() == ["Maya", "Chen", "8"] for line in lines)
    assert "notes linked to code (3):" in lines
    assert any(line.split() == ["Lumen.md", "2"] for line in lines)


def test_a_source_without_cross_source_figures_says_so():
    text = render_vault_context({**repository_context({}), "kind": "tickets"})
    assert text.splitlines()[1] == "  no figures yet: nothing links this source with another one"
    assert text.startswith("lumen (ticket set): ")


def test_status_marks_sources_not_yet_published():
    layers = ("notes", "attachments", "commits", "repo_files", "repo_docs", "tickets", "failed",
              "chunks", "vectors", "nodes", "edges", "broken_links")
    row = {"kind": "vault", "path": "/v", **{c: 0 for c in layers}}
    text = render_status({"data_dir": "/d", "totals": {c: 53 * (c == "notes") for c in layers},
                          "published": {
        "version": "v1", "model": "m", "published_at": "2026-11-24T08:17:45.2+00:00"},
        "sources": [{**row, "name": "sample", "published": True, "notes": 53},
                    {**row, "name": "later", "published": False}]})
    lines = text.splitlines()
    assert lines[1] == "published: v1 (m) at 2026-11-24T08:17:45Z"
    assert lines[4].split()[:4] == ["sample", "vault", "yes", "53"]
    assert lines[5].split()[:4] == ["later", "vault", "no", "0"]


def test_status_says_how_the_vectors_were_embedded_and_why():
    embedding = {"backend": "openvino", "precision": "f32",
                 "reason": "auto: openvino; not openvino-bf16: this CPU has no native bf16"}
    text = render_status({"data_dir": "/d", "totals": {}, "sources": [], "published": {
        "version": "v1", "model": "m", "published_at": "2026-11-24T08:17:45.2+00:00",
        "embedding": embedding}})
    assert text.splitlines()[2] == ("embedded with openvino (f32): auto: openvino; not "
                                    "openvino-bf16: this CPU has no native bf16")


def test_table_aligns_columns_under_a_rule():
    assert table([{"a": 1, "bb": "long value"}], ["a", "bb"], "  ").splitlines() == [
        "  a  bb", "  -  ----------", "  1  long value"]


def test_notifications_newest_first_with_their_failed_steps():
    assert render_notifications({"notifications": []}) == "no failure notices"
    text = render_notifications({"notifications": [
        {"created_at": "2026-11-24T08:00:00", "title": "Jarvis run failed", "message": "boom",
         "failed_steps": ["chunks", "embeddings"]}]})
    assert text.splitlines() == [
        "2026-11-24T08:00:00  Jarvis run failed (steps: chunks, embeddings)", "    boom"]
