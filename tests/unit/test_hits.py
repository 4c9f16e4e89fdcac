"""The query side's one search hit (jarvis_query/results.py): what joining with the published
chunk rows fills in, its JSON for each kind of search, and the MCP schema derived from it."""

from dataclasses import FrozenInstanceError, replace

import duckdb
import jsonschema
import pytest

from jarvis_core.config import config_from_mapping
from jarvis_core.stores import serving
from jarvis_core.stores.tables import CHUNKS
from jarvis_query.mcp_schemas import GraphOutput, SearchHit, SearchOutput
from jarvis_query.results import FUSED, OPTIONAL, SHOWN, Hit, Hits, jsonable, published
from jarvis_query.snapshot import Snapshot

LONG = "word " * 100  # 500 characters: its snippet is cut at a word boundary
ROWS = [  # chunk id, doc key, path, position, heading path, text
    ("c1", "note:v/a.md", "a.md", 0, ["A"], "The opening of A."),
    ("c2", "note:v/a.md", "a.md", 1, ["A", "Second"], LONG),
    ("c3", "note:v/b.md", "b.md", 0, [], "B alone."),
]


@pytest.fixture
def snapshot(tmp_path):
    tables = duckdb.connect(":memory:")
    tables.execute(CHUNKS.create_sql())
    tables.executemany(
        "INSERT INTO chunks (chunk_id, source, source_type, doc_key, path, title, position, "
        "heading_path, text) VALUES (?, 'v', 'note', ?, ?, upper(?), ?, ?, ?)",
        [(chunk_id, doc_key, path, path, position, headings, text)
         for chunk_id, doc_key, path, position, headings, text in ROWS])
    config = config_from_mapping({"vaults": {"v": str(tmp_path)}}, base_dir=tmp_path)
    yield Snapshot(config, serving.PublishedVersion("v1", tmp_path, {"model": "m"}), tables)
    tables.close()


def test_a_leaf_hit_made_fast_is_the_hit_the_constructor_makes():
    fast, made = Hit.scored("c1", 0.5), Hit(chunk_id="c1", score=0.5)
    assert fast == made and repr(fast) == repr(made) and fast.as_dict() == made.as_dict()
    assert replace(fast, path="a.md") == replace(made, path="a.md")
    with pytest.raises(FrozenInstanceError):
        fast.score = 1.0


def test_a_chunk_hit_gets_its_place_heading_and_snippet_in_its_own_order(snapshot):
    hits = [Hit.scored("c2", 0.9), Hit.scored("newer-than-tables", 0.8),
            Hit(chunk_id="c3", score=0.7, snippet="**B** alone.", match="content")]
    second, alone = published(snapshot, hits)
    assert second == Hit(chunk_id="c2", score=0.9, path="a.md", vault="v", heading="Second",
                         title="A.MD", source_type="note", snippet=("word " * 59) + "word …")
    # a keyword preview stays; a chunk without headings has none
    assert (alone.path, alone.heading, alone.snippet) == ("b.md", "", "**B** alone.")
    assert published(snapshot, []) == []


def test_a_document_hit_is_shown_by_its_opening_chunk(snapshot):
    found = [Hit(path="a.md", vault="v", title="A", source_type="note", score=2.5,
                 match="name", doc_key="note:v/a.md"),
             Hit(path="c.md", vault="v", title="C", source_type="note", score=1.0,
                 match="name", doc_key="note:v/c.md")]  # a document without chunks
    opening, unchunked = published(snapshot, found)
    assert (opening.chunk_id, opening.snippet, opening.heading) == ("c1", "The opening of A.", "")
    assert (opening.path, opening.title, opening.score) == ("a.md", "A", 2.5)
    assert (unchunked.chunk_id, unchunked.snippet, unchunked.path) == ("", "", "c.md")


def test_the_json_of_each_kind_of_hit():
    place = {"path": "a.md", "vault": "v", "heading": "H", "snippet": "s", "title": "A",
             "chunk_id": "c1", "source_type": "note"}
    semantic = Hit(score=0.812345678, **place)
    assert list(semantic.as_dict()) == list(SHOWN)
    assert semantic.as_dict()["score"] == 0.8123
    named = Hit(score=3.0, match="name", doc_key="note:v/a.md", **place).as_dict()
    assert named == {**place, "score": 3.0, "match": "name"}  # the doc key is never shown
    # a fused hit shows both legs, the one that did not find it as None
    keyword_leg = Hit(score=0.0325, fusion="rrf", keyword_rank=2, keyword_score=7.123456,
                      **place).as_dict()
    semantic_leg = Hit(score=0.0164, fusion="rrf", semantic_rank=1, semantic_score=0.61,
                       **place).as_dict()
    for fused in (keyword_leg, semantic_leg):
        assert list(fused) == [*SHOWN, "fusion", "keyword_rank", "keyword_score",
                               "semantic_rank", "semantic_score"]
    assert [keyword_leg[name] for name in FUSED] == ["rrf", 2, 7.1235, None, None]
    assert [semantic_leg[name] for name in FUSED] == ["rrf", None, None, 1, 0.61]


def test_the_mcp_search_hit_is_the_hits_json():
    schema = SearchHit.model_json_schema()
    assert list(schema["properties"]) == [*SHOWN, *OPTIONAL]
    assert schema["required"] == list(SHOWN)
    assert schema["properties"]["keyword_rank"]["anyOf"] == [{"type": "integer"},
                                                             {"type": "null"}]
    output = SearchOutput.model_json_schema()
    hits = Hits([Hit(score=1.0, chunk_id="c1", match="content"),
                 Hit(score=0.5, fusion="keyword only", keyword_rank=1, keyword_score=4.0)],
                {"complete": True, "done": 1, "total": 1, "message": None})
    answer = {"schema_version": "v1", "correlation_id": "x", **jsonable(hits.answer("q"))}
    jsonschema.validate(answer, output)
    del answer["results"][0]["heading"]
    with pytest.raises(jsonschema.ValidationError, match="'heading' is a required property"):
        jsonschema.validate(answer, output)


def test_answers_carry_hits_until_they_are_written_as_json():
    fallback = Hits([Hit(score=0.61, path="Alerting.md", vault="v")],
                    {"complete": True, "done": 1, "total": 1, "message": None})
    graph = {"available": False, "message": "no graph", "fallback": fallback,
             "embeddings": fallback.embeddings}
    written = jsonable(graph)
    assert written["fallback"] == [fallback[0].as_dict()] and written["message"] == "no graph"
    jsonschema.validate({"schema_version": "v1", "correlation_id": "x", **written},
                        GraphOutput.model_json_schema())
    assert Hits(fallback).answer("q") == {"query": "q", "results": fallback}  # keyword search
    assert fallback.answer("q")["embeddings"]["complete"] is True
