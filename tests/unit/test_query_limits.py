"""Pure parts of the query side's hardening and of its new answers: input caps and the
messages that echo no more than a prefix, the source types, the MCP argument errors, the
published versions listed and read, the embeddings progress of a version, and how threads,
pages, every kind of source and a passed-over version are shown."""

import json

import pytest
from pydantic import BaseModel, ValidationError

from jarvis_core.config import config_from_mapping
from jarvis_core.stores import serving
from jarvis_query import mcp_arguments as arg
from jarvis_query.render import render_document, render_results, render_status, render_vaults
from jarvis_query.results import Hit
from jarvis_query.snapshot import Snapshot
from jarvis_query.validation import (
    MAX_QUERY_CHARS,
    SOURCE_TYPES,
    QueryError,
    check_search,
    search_filter,
    shown,
)


@pytest.fixture
def config(tmp_path):
    return config_from_mapping({"vaults": {"v": str(tmp_path)}}, base_dir=tmp_path)


def test_the_source_types_are_those_the_chunker_writes():
    assert SOURCE_TYPES == ("note", "commit", "repo_doc", "code", "ticket", "email", "page")
    assert search_filter(None, list(SOURCE_TYPES)).source_types == list(SOURCE_TYPES)
    with pytest.raises(QueryError, match="unknown source type 'thread'"):
        search_filter(None, ["thread"])


def test_a_query_over_the_cap_is_refused_by_its_size_alone(config):
    check_search(config, "q" * MAX_QUERY_CHARS, 10, None)
    with pytest.raises(QueryError) as refused:
        check_search(config, "q" * 10_000_000, 10, None)
    assert str(refused.value) == "query is too long: 10,000,000 characters (at most 4,000)"
    assert refused.value.naming({"query": "QUERY"}).startswith("QUERY is too long")


def test_messages_echo_a_prefix_only(config):
    assert shown("short") == "short"
    assert shown("z" * 5000) == "z" * 100 + "…"
    with pytest.raises(QueryError) as unknown:
        check_search(config, "q", 10, "v" * 5000)
    assert str(unknown.value) == f"Unknown vault '{'v' * 100}…'"
    with pytest.raises(QueryError, match="modified_after is too long: 200 characters"):
        search_filter(modified_after="2" * 200)


def test_lists_are_capped_and_source_types_known():
    assert search_filter(source_types=["email", "page"]).source_types == ["email", "page"]
    with pytest.raises(QueryError, match=r"^tags is too long: 21 items \(at most 20\)$"):
        search_filter(tags=[f"t{i}" for i in range(21)])
    with pytest.raises(QueryError, match="each of source_types must be at most 128"):
        search_filter(source_types=["n" * 129])
    with pytest.raises(QueryError) as unknown:
        search_filter(source_types=["note", "mail"])
    assert str(unknown.value) == ("unknown source type 'mail': source_types are note, commit, "
                                  "repo_doc, code, ticket, email, page")


class Arguments(BaseModel):
    query: arg.Query
    source_types: arg.SourceTypes = None
    path: arg.ReadPath = "x"


def test_mcp_schemas_carry_the_caps_and_their_errors_no_input():
    from mcp.server.mcpserver.exceptions import ToolError

    from jarvis_query.mcp_server import _argument_problem

    schema = Arguments.model_json_schema()["properties"]
    assert schema["query"]["maxLength"] == MAX_QUERY_CHARS
    assert schema["path"]["maxLength"] == 1024
    with pytest.raises(ValidationError) as invalid:
        Arguments(query="s" * 9000, source_types=["note"] * 30, path="p" * 2000)
    error = ToolError("invalid arguments")
    error.__cause__ = invalid.value
    assert _argument_problem(error) == (
        "query is too long: 9,000 characters (at most 4,000); source_types is too long: "
        "30 items (at most 20); path is too long: 2,000 characters (at most 1,024)")


def _version(tmp_path, name: str, manifest: dict | str | None) -> None:
    folder = serving.serving_root(tmp_path) / name
    folder.mkdir(parents=True)
    if manifest is not None:
        (folder / serving.MANIFEST_FILE).write_text(
            manifest if isinstance(manifest, str) else json.dumps(manifest))


def test_published_versions_are_listed_newest_first_and_read_by_name(tmp_path):
    assert serving.published_names(tmp_path) == []
    _version(tmp_path, "20261124T100000000000Z-aaaaaa", {"model": "m"})
    _version(tmp_path, "20261124T110000000000Z-bbbbbb", None)
    _version(tmp_path, "20261124T090000000000Z-cccccc", "{not json")
    (serving.serving_root(tmp_path) / ".staging-20261124T120000000000Z-dddddd").mkdir()
    assert serving.published_names(tmp_path) == [
        "20261124T110000000000Z-bbbbbb", "20261124T100000000000Z-aaaaaa",
        "20261124T090000000000Z-cccccc"]
    assert serving.read_version(tmp_path, "20261124T100000000000Z-aaaaaa").manifest == {
        "model": "m"}
    with pytest.raises(serving.VersionDamaged, match="has no readable manifest.json "
                                                     r"\(FileNotFoundError\)"):
        serving.read_version(tmp_path, "20261124T110000000000Z-bbbbbb")
    with pytest.raises(serving.VersionDamaged, match=r"\(JSONDecodeError\)"):
        serving.read_version(tmp_path, "20261124T090000000000Z-cccccc")
    assert issubclass(serving.VersionDamaged, serving.NotPublished)


def test_a_version_says_how_far_its_embeddings_are(config, tmp_path):
    def embeddings(manifest: dict) -> dict:
        version = serving.PublishedVersion("v", tmp_path, {"model": "m", **manifest})
        return Snapshot(config, version, tables=None).embeddings

    assert embeddings({"chunks": 36722, "vectors": {"a": 12000, "b": 400},
                       "vectors_complete": False}) == {
        "complete": False, "done": 12400, "total": 36722,
        "message": "embeddings 12,400 of 36,722 chunks: keyword results until every chunk "
                   "has its vector"}
    assert embeddings({"chunks": 5, "vectors": {"a": 5}, "vectors_complete": True}) == {
        "complete": True, "done": 5, "total": 5, "message": None}
    assert embeddings({})["complete"] is True  # published before progressive publishing


def test_the_note_leads_the_results_it_concerns():
    progress = {"complete": False, "done": 1, "total": 9, "message": "embeddings 1 of 9"}
    hit = Hit(score=1.5, vault="m", path="threads/x", snippet="s")
    assert render_results({"query": "q", "results": [hit], "embeddings": progress}
                          ).splitlines()[:2] == ["note: embeddings 1 of 9", "1 result for 'q'"]
    assert render_results({"query": "q", "results": [], "embeddings": progress}) == (
        "note: embeddings 1 of 9\nno results for 'q'")
    assert "note" not in render_results({"query": "q", "results": [hit], "embeddings": {
        **progress, "complete": True, "message": None}})


def test_every_kind_is_shown_by_one_renderer_from_its_details():
    """A document's facts are lines, its detail lists rows named by their first value (the
    one it was opened by marked), its graph neighbours openable by source and path."""
    document = {
        "kind": "email", "vault": "m", "path": "threads/1@x", "key": "thread:m/1@x",
        "title": "Dedupe", "created_at": "2026-10-09T08:12:00",
        "modified_at": "2026-10-12T14:45:00", "tags": [], "named": "2@x",
        "details": {"participants": ["Ann <a@x>", "Bo"], "messages": [
            {"message_id": "1@x", "sent_at": "2026-10-09T08:12:00", "from": "Ann <a@x>",
             "attachments": [], "binary": False},
            {"message_id": "2@X", "sent_at": "2026-10-10T07:02:00", "from": "Bo",
             "attachments": ["r.csv"], "deletions": 0}]},
        "warnings": ["one message had no date"], "published": True,
        "links": [{"key": "ticket:LUM-4", "title": "LUM-4: Dedupe", "relations": ["MENTIONS"],
                   "vault": "jira", "path": "tickets/LUM-4"}],
        "backlinks": [{"key": "person:a", "title": "Ann", "relations": ["AUTHORED"],
                       "vault": None, "path": None}],
        "content": "## Ann · body"}
    lines = render_document(document).splitlines()
    assert lines[:7] == [
        "# Dedupe  (m/threads/1@x, email, created 2026-10-09T08:12:00, modified "
        "2026-10-12T14:45:00)",
        "key: thread:m/1@x",
        "participants: Ann <a@x>, Bo",
        "messages:",
        "- 1@x, sent at: 2026-10-09T08:12:00, from: Ann <a@x>",
        "→ 2@X, sent at: 2026-10-10T07:02:00, from: Bo, attachments: r.csv, deletions: 0",
        "links: LUM-4: Dedupe [jira/tickets/LUM-4] (MENTIONS)"]
    assert lines[7:] == ["backlinks: Ann (AUTHORED)", "warning: one message had no date", "",
                         "## Ann · body"]
    unpublished = render_document({**document, "links": None, "backlinks": None,
                                   "details": {}, "warnings": [], "created_at": None,
                                   "tags": ["a"]}).splitlines()
    assert unpublished[:5] == ["# Dedupe  (m/threads/1@x, email, modified 2026-10-12T14:45:00)",
                               "key: thread:m/1@x", "tags: #a",
                               "links: (nothing published yet)",
                               "backlinks: (nothing published yet)"]


def test_every_kind_of_source_is_listed_with_its_counts():
    published = {"version": "v2", "published_at": "2026-11-24T10:00:00", "embeddings": {
        "complete": True, "message": None}, "unreadable": [
        {"version": "v3", "state": "corrupt", "reason": "no manifest"}]}
    sources = [{"name": "m", "kind": "mail", "path": "/m.mbox", "messages": 10, "threads": 3,
                "failed": 0, "chunks": {"email": 17}},
               {"name": "w", "kind": "confluence", "path": "/w", "pages": 6, "failed": 1,
                "chunks": {}}]
    lines = render_vaults({"published": published, "vaults": [], "other_sources": sources}
                          ).splitlines()
    assert lines[1] == "serving version v3 is corrupt (no manifest): showing version v2"
    assert lines[2:] == ["- m (mail, /m.mbox): 10 messages, 3 threads; chunks: 17 email; "
                         "0 failed",
                         "- w (confluence, /w): 6 pages; chunks: none published; 1 failed"]
    status = render_status({"data_dir": "/d", "published": {**published, "model": "x"},
                            "sources": [], "totals": {"messages": 10, "threads": 3,
                                                      "pages": 6}}).splitlines()
    assert status[2] == lines[1] and "messages  threads  pages" in status[3]
