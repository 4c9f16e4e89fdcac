"""The MCP server driven over stdio by the SDK's own client, against stores built once by
running the pipeline on the sample vault: the tool list, every tool with good and bad
arguments, read-note refusing every way out of the vault, correlation ids in the logs."""

import json
import re
import sys
import threading
import traceback

import anyio
import pytest
from mcp import Client

from jarvis_core.stores import serving
from jarvis_pipeline.refresh import run_refresh
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.mcp_server import build_server
from tests.pipeline_helpers import private_copy, write_config
from tests.query_helpers import JARVIS, converse, publish_encoder

pytestmark = pytest.mark.slow

QUERY_TOOLS = {"search-semantic", "search-vault", "search-hybrid", "search-graph",
               "search-graphrag", "search-code", "get-symbol", "read-note", "read",
               "list-vaults", "get-vault-context"}
# `jarvis serve` adds the assistant tools (memory, health) to build_server's query tools
TOOLS = QUERY_TOOLS | {"remember", "recall", "forget", "health-status", "performance-metrics"}
SECRET = "TOP SECRET: do not serve"


@pytest.fixture(scope="module")
def published(published_sample, tmp_path_factory):
    """The published sample, copied; then a secret beside its vault and a symlink leading
    to it."""
    root = tmp_path_factory.mktemp("mcp")
    config = private_copy(published_sample, root)
    publish_encoder(config.data_dir)
    (root / "secret.md").write_text(SECRET)
    (root / "vault" / "Leak.md").symlink_to(root / "secret.md")
    return config


TRAVERSALS = ["../secret.md", "../project/jarvis.yaml", "..%2Fsecret.md", "%2e%2e/secret.md",
              "%252e%252e%252fsecret.md", "..\\secret.md", "Areas\\..\\..\\secret.md",
              "/etc/passwd", "Leak.md", "Leak", "Areas/Health/Sleep.md\x00../../secret.md",
              "．．/secret.md", "‥/secret.md", "Areas/../../secret.md", ".obsidian/app.json"]

GOOD = {
    "semantic": ("search-semantic", {"query": "eggs poached in a spiced tomato and pepper "
                                              "sauce", "limit": 3}),
    "semantic_filtered": ("search-semantic", {"query": "sleep", "vault": "sample", "limit": 50,
                                              "similarity_threshold": 0.3}),
    "vault_names": ("search-vault", {"query": "Shakshuka"}),
    "vault_content": ("search-vault", {"query": "idempotency key", "search_content": True,
                                       "limit": 5}),
    "hybrid": ("search-hybrid", {"query": "duplicate readings idempotency key", "limit": 5}),
    "hybrid_chunks": ("search-hybrid", {"query": "duplicate readings idempotency key",
                                        "limit": 5, "group": "chunk"}),
    "graph": ("search-graph", {"query_note_path": "Projects/Lumen/Architecture/Alerting.md",
                               "depth": 2}),
    "graphrag": ("search-graphrag", {"query": "how are alerts raised for a station",
                                     "limit": 5, "max_tokens": 1000}),
    "read": ("read-note", {"path": "Areas/Health/Sleep.md"}),
    "read_by_title": ("read-note", {"path": "Shakshuka", "vault": "sample"}),
    "vaults": ("list-vaults", {}),
    "context": ("get-vault-context", {"vault": "sample"}),
    # numbers and flags typed into a client's form arrive as text (the MCP Inspector)
    "semantic_as_text": ("search-semantic", {"query": "sleep", "limit": "3",
                                             "similarity_threshold": "0.2"}),
    "vault_as_text": ("search-vault", {"query": "idempotency key", "search_content": "true",
                                       "limit": "5"}),
    "hybrid_as_text": ("search-hybrid", {"query": "alerting", "alpha": "0.5", "limit": "5"}),
    "graph_as_text": ("search-graph", {"query_note_path": "Alerting", "depth": "2"}),
    "graphrag_as_text": ("search-graphrag", {"query": "alerting rules", "limit": "3",
                                             "depth": "1", "max_tokens": "800"}),
}
BAD = {  # label -> (tool, arguments, the start of the error text)
    "semantic_no_query": ("search-semantic", {"limit": 3}, "Error: query parameter is required"),
    "semantic_blank": ("search-semantic", {"query": "  "}, "Error: query parameter is required"),
    "semantic_limit": ("search-semantic", {"query": "x", "limit": 0},
                       "Error: limit must be between 1 and 50"),
    "semantic_limit_type": ("search-semantic", {"query": "x", "limit": "many"},
                            "Error: limit: Input should be a valid integer"),
    "semantic_limit_bool": ("search-semantic", {"query": "x", "limit": True},
                            "Error: limit: Input should be a valid integer"),
    "vault_content_type": ("search-vault", {"query": "x", "search_content": "yes"},
                           "Error: search_content: Input should be a valid boolean"),
    "semantic_limit_word": ("search-semantic", {"query": "x", "limit": "ten"},
                            "Error: limit: Input should be a valid integer"),
    "semantic_threshold_text": ("search-semantic", {"query": "x", "similarity_threshold": "2"},
                                "Error: similarity_threshold must be between -1 and 1"),
    "hybrid_alpha_word": ("search-hybrid", {"query": "x", "alpha": "ten"},
                          "Error: alpha: Input should be a valid number"),
    "graph_depth_word": ("search-graph", {"query_note_path": "Alerting", "depth": "two"},
                         "Error: depth: Input should be a valid integer"),
    "semantic_vault": ("search-semantic", {"query": "x", "vault": "nope"},
                       "Error: Unknown vault 'nope'"),
    "semantic_threshold": ("search-semantic", {"query": "x", "similarity_threshold": 2},
                           "Error: similarity_threshold must be between -1 and 1"),
    "vault_no_query": ("search-vault", {"search_content": True},
                       "Error: query parameter is required"),
    "vault_limit": ("search-vault", {"query": "x", "limit": 51},
                    "Error: limit must be between 1 and 50"),
    "vault_vault": ("search-vault", {"query": "x", "vault": "nope"},
                    "Error: Unknown vault 'nope'"),
    "hybrid_vault": ("search-hybrid", {"query": "x", "vault": "nope"},
                     "Error: Unknown vault 'nope'"),
    "hybrid_alpha": ("search-hybrid", {"query": "x", "alpha": 1.5}, "Error: alpha"),
    "hybrid_group": ("search-hybrid", {"query": "x", "group": "paragraph"},
                     "Error: group: Input should be 'document' or 'chunk'"),
    "hybrid_date": ("search-hybrid", {"query": "x", "modified_after": "last tuesday"},
                    "Error: modified_after"),
    "graph_depth": ("search-graph", {"query_note_path": "Alerting", "depth": 4},
                    "Error: depth must be between 1 and 3"),
    "graph_no_note": ("search-graph", {}, "Error: query_note_path parameter is required"),
    "graph_unknown_note": ("search-graph", {"query_note_path": "No Such Note"},
                           "Error: 'No Such Note' names no document in the sources you can "
                           "read"),
    "graphrag_no_query": ("search-graphrag", {}, "Error: query parameter is required"),
    "graphrag_vault": ("search-graphrag", {"query": "x", "vault": "nope"},
                       "Error: Unknown vault 'nope'"),
    "read_missing": ("read-note", {"path": "Nope/Missing.md"},
                     "Error: 'Nope/Missing.md' names no document in the sources you can "
                     "read"),
    "read_no_path": ("read-note", {}, "Error: path parameter is required"),
    "read_vault": ("read-note", {"path": "Sleep", "vault": "nope"},
                   "Error: Unknown vault 'nope'"),
    "context_vault": ("get-vault-context", {"vault": "nope"}, "Error: Unknown vault 'nope'"),
    "context_no_vault": ("get-vault-context", {}, "Error: vault parameter is required"),
    "unknown_tool": ("search-everything", {"query": "x"}, "Error: Unknown tool"),
    **{f"traversal_{i}": ("read-note", {"path": path}, "Error reading note: Access denied: ")
       for i, path in enumerate(TRAVERSALS)},
}


REFRESH_QUERY = ("search-vault", {"query": "zanzibarquokka", "search_content": True})
AROUND_THE_REFRESH = ("before", "refresh", "after")


@pytest.fixture(scope="module")
def conversation(published, tmp_path_factory):
    """One `jarvis serve` session making every call, then searching for a word no note
    holds, editing a note and refreshing while the server runs, and searching again (for
    test_a_refresh_is_served_without_restarting_the_server: one server started, not two);
    its log file is kept for inspection."""
    log = tmp_path_factory.mktemp("logs") / "stderr.log"
    calls = {**GOOD, **{label: (tool, args) for label, (tool, args, _) in BAD.items()}}
    note = published.sources["sample"].path / "Personal" / "Recipes" / "Shakshuka.md"

    def edit_and_refresh():
        note.write_text(note.read_text() + "\nServe with zanzibarquokka flatbread.\n")
        try:
            return run_refresh(published)
        except Exception:  # the refresh test's failure, not every test's of the session
            return {"ok": False, "raised": traceback.format_exc()}

    command = [JARVIS, "--config", str(published.config_path), "serve",
               "--log-file", str(log.with_name("server.log"))]
    tools, results = converse(command, {**calls, "before": REFRESH_QUERY,
                                        "refresh": edit_and_refresh, "after": REFRESH_QUERY},
                              log)
    around = {label: results.pop(label) for label in AROUND_THE_REFRESH}
    return (tools, results, log), around


@pytest.fixture(scope="module")
def session(conversation):
    """The tools, the results of GOOD and BAD by label, and the server's stderr log."""
    return conversation[0]


def text(result) -> str:
    return result.content[0].text


def answer(session, label: str) -> dict:
    result = session[1][label]
    assert not result.is_error, text(result)
    assert text(result).strip()
    return result.structured_content


def test_tool_list_and_schemas(session):
    tools, _, _ = session
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        assert tool.annotations.read_only_hint is (tool.name not in {"remember", "forget"})
    semantic = tools["search-semantic"].input_schema
    assert semantic["required"] == ["query"]
    assert semantic["properties"]["limit"].items() >= {
        "default": 10, "minimum": 1, "maximum": 50}.items()
    assert set(semantic["properties"]) == {"query", "limit", "vault", "similarity_threshold",
                                           "group"}
    assert set(tools["search-hybrid"].input_schema["properties"]) == {
        "query", "limit", "vault", "alpha", "source_types", "tags", "modified_after",
        "modified_before", "group"}
    assert set(tools["search-graphrag"].input_schema["properties"]) == {
        "query", "limit", "vault", "depth", "max_tokens", "source_types"}
    assert set(tools["search-vault"].input_schema["properties"]) == {
        "query", "search_content", "limit", "vault", "source_types", "group"}
    assert semantic["properties"]["group"]["enum"] == ["document", "chunk"]
    assert semantic["properties"]["group"]["default"] == "document"
    assert semantic["properties"]["query"]["maxLength"] == 4000
    source_types = tools["search-hybrid"].input_schema["properties"]["source_types"]
    assert source_types["anyOf"][0]["items"]["enum"] == [
        "note", "commit", "repo_doc", "code", "ticket", "email", "page"]
    assert tools["search-graphrag"].input_schema["properties"]["max_tokens"]["default"] == 6500
    graph = tools["search-graph"].input_schema
    assert graph["required"] == ["query_note_path"]
    assert graph["properties"]["depth"].items() >= {
        "default": 1, "minimum": 1, "maximum": 3}.items()
    assert tools["read-note"].input_schema["required"] == ["path"]
    assert tools["get-vault-context"].input_schema["required"] == ["vault"]
    assert tools["get-symbol"].input_schema["required"] == ["name"]
    assert set(tools["get-symbol"].input_schema["properties"]) == {"name", "repo"}
    assert set(tools["search-code"].input_schema["properties"]) == {"query", "limit", "repo"}
    assert tools["list-vaults"].input_schema.get("required", []) == []


def test_every_result_carries_schema_version_and_a_logged_correlation_id(session):
    _, results, log = session
    ids = set()
    logged = log.read_text()
    server_log = log.with_name("server.log").read_text()
    for label, result in results.items():
        data = result.meta if result.is_error else result.structured_content
        assert data["schema_version"] == "v1", label
        assert re.fullmatch(r"[0-9a-f]{16}", data["correlation_id"]), label
        ids.add(data["correlation_id"])
        status = "error" if result.is_error else "ok"
        line = re.search(rf"correlation_id={data['correlation_id']} tool=(\S+) "
                         rf"status={status} duration_ms=[\d.]+", logged)
        assert line, label
        assert data["correlation_id"] in server_log
    assert len(ids) == len(results)


@pytest.mark.parametrize("label", list(BAD))
def test_bad_arguments_are_error_results(session, label):
    result = session[1][label]
    expected = BAD[label][2]
    assert result.is_error, text(result)
    assert text(result).startswith(expected), text(result)
    # no structured content: TypeScript clients would check it against the outputSchema
    assert result.structured_content is None and len(result.content) == 1
    assert result.meta["error_type"] in {"invalid_argument", "note_unreadable"}
    assert SECRET not in text(result)


def test_search_semantic(session):
    data = answer(session, "semantic")
    assert data["results"][0]["path"] == "Personal/Recipes/Shakshuka.md"
    assert len(data["results"]) == 3 and data["query"].startswith("eggs poached")
    assert "1. " in text(session[1]["semantic"]) and "Shakshuka.md" in text(session[1]["semantic"])
    filtered = answer(session, "semantic_filtered")["results"]
    assert filtered and all(r["score"] >= 0.3 and r["vault"] == "sample" for r in filtered)


def test_search_graph(session):
    data = answer(session, "graph")
    assert data["available"] is True and data["center"]["title"] == "Alerting"
    assert data["depth"] == 2 and data["counts"]["notes"] > 1
    assert text(session[1]["graph"]).startswith("Alerting (sample/Projects/Lumen/Architecture/")


def test_read_note(session, published):
    data = answer(session, "read")
    sleep = published.sources["sample"].path / "Areas" / "Health" / "Sleep.md"
    assert data["content"] == sleep.read_text() and data["title"] == "Sleep"
    assert {"health", "sleep"} <= set(data["tags"]) and data["published"] is True
    assert "Reading/Books/Why We Sleep.md" in [n["path"] for n in data["links"]]
    assert "People/Maya Chen.md" in [n["path"] for n in data["backlinks"]]
    readable = text(session[1]["read"])
    assert readable.startswith("# Sleep  (sample/Areas/Health/Sleep.md")
    assert "backlinks: " in readable
    assert answer(session, "read_by_title")["path"] == "Personal/Recipes/Shakshuka.md"


def test_list_vaults(session):
    data = answer(session, "vaults")
    [vault] = data["vaults"]
    assert (vault["name"], vault["kind"], vault["notes"], vault["attachments"]) == (
        "sample", "vault", 53, 2)
    assert vault["chunks"]["note"] > 53 and vault["last_refresh"] == data["published"][
        "published_at"]
    assert data["other_sources"] == []
    assert "- sample (vault, " in text(session[1]["vaults"])


def test_search_vault(session):
    names = answer(session, "vault_names")["results"]
    assert names[0]["path"] == "Personal/Recipes/Shakshuka.md"
    content = answer(session, "vault_content")["results"]
    assert content and any("Idempotent" in r["path"] or "Ingest" in r["path"] for r in content)


def test_search_hybrid(session):
    results = answer(session, "hybrid")["results"]
    assert results[0]["path"] in {"Projects/Lumen/Architecture/Ingest API.md",
                                  "Projects/Lumen/Decisions/ADR-002 Idempotent Ingest.md"}


def test_search_graphrag(session):
    data = answer(session, "graphrag")
    assert "Alerting" in json.dumps(data)
    assert text(session[1]["graphrag"]).strip()


def test_get_vault_context(session):
    data = answer(session, "context")
    assert data["vault"] == "sample"
    assert {"generated_at", "content_hash", "is_stale", "cache_hit"} <= set(data)


def test_numbers_and_flags_sent_as_text_are_taken(session):
    semantic = answer(session, "semantic_as_text")["results"]
    assert len(semantic) == 3 and all(r["score"] >= 0.2 for r in semantic)
    content = answer(session, "vault_as_text")["results"]
    assert len(content) == 5 and all(r["match"] == "content" for r in content)
    assert {r["fusion"] for r in answer(session, "hybrid_as_text")["results"]} == {"alpha=0.5"}
    assert answer(session, "graph_as_text")["depth"] == 2
    pack = answer(session, "graphrag_as_text")
    assert pack["max_tokens"] == 800 and len(pack["sources"]) == 3


def test_tools_answer_while_the_encoder_loads_and_a_search_waits_for_it(published):
    """initialize, tools/list and a keyword search answer while the background load of the
    query encoder is held up; a semantic search waits for that load, not for one of its own."""
    kb = KnowledgeBase(published)
    loading, release, loads = threading.Event(), threading.Event(), []
    load = kb.dense._load

    def held_up_load(version):
        loads.append(version.name)
        loading.set()
        release.wait(120)
        return load(version)

    kb.dense._load = held_up_load
    kb.load_in_background()
    assert loading.wait(60)
    asked, encoder = threading.Event(), kb.dense.encoder

    def asked_encoder(version):  # the search asks for the encoder the load is making
        asked.set()
        return encoder(version)

    kb.dense.encoder = asked_encoder

    async def converse():
        async with Client(build_server(kb)) as client:  # initialize
            tools = await client.list_tools()
            names = await client.call_tool("search-vault", {"query": "Shakshuka"})
            answered = {}

            async def semantic():
                answered["semantic"] = await client.call_tool("search-semantic",
                                                              {"query": "sleep", "limit": 3})

            async with anyio.create_task_group() as group:
                group.start_soon(semantic)
                assert await anyio.to_thread.run_sync(asked.wait, 60)
                held_up = "semantic" not in answered
                release.set()
        return tools, names, held_up, answered["semantic"]

    try:
        tools, names, held_up, semantic = anyio.run(converse)
    finally:
        release.set()
        kb.close()
    assert {tool.name for tool in tools.tools} == QUERY_TOOLS
    assert not names.is_error and held_up
    assert not semantic.is_error and len(semantic.structured_content["results"]) == 3
    assert loads == [serving.current_name(published.data_dir)]


def test_graph_unavailable_falls_back_over_the_module_entry_point(published, tmp_path):
    """`python -m jarvis_query.mcp_stdio` serves too; a version without its graph answers
    with the seed's message and semantic results instead."""
    graph = serving.current_version(published.data_dir).graph_path
    hidden = graph.with_name("graph.sqlite.hidden")
    graph.rename(hidden)
    try:
        _, results = converse(
            [sys.executable, "-m", "jarvis_query.mcp_stdio", "--config",
             str(published.config_path)],
            {"graph": ("search-graph", {"query_note_path": "Alerting"})}, tmp_path / "log")
    finally:
        hidden.rename(graph)
    result = results["graph"]
    assert not result.is_error
    data = result.structured_content
    assert data["available"] is False
    assert data["message"].startswith("Graph search is currently unavailable: ")
    assert data["fallback"] and text(result).startswith("Graph search is currently unavailable")


def test_nothing_published_yet(tmp_path, sample_vault):
    config = write_config(tmp_path / "fresh", {"sample": sample_vault})
    _, results = converse(
        [sys.executable, "-m", "jarvis_query.mcp_stdio", "--config", str(config.config_path)],
        {"vaults": ("list-vaults", {}), "semantic": ("search-semantic", {"query": "sleep"}),
         "read": ("read-note", {"path": "Areas/Health/Sleep.md"})}, tmp_path / "log")
    assert results["vaults"].structured_content["published"] is None
    assert results["semantic"].is_error
    assert text(results["semantic"]).startswith("Error: nothing published under ")
    read = results["read"].structured_content
    assert read["published"] is False and read["links"] is None and read["content"]


def test_a_refresh_is_served_without_restarting_the_server(conversation):
    """The server keeps answering from the published version while a refresh runs, and
    answers from the new one as soon as it is published (the module's session, after its
    other calls)."""
    _, results = conversation
    assert results["refresh"]["ok"], results["refresh"]
    assert results["before"].structured_content["results"] == []
    [hit] = results["after"].structured_content["results"]
    assert hit["path"] == "Personal/Recipes/Shakshuka.md" and "zanzibarquokka" in hit["snippet"]
