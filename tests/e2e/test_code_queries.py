"""Asking about code on the shipped sample (issue 27): the lumen repository's Python code is
parsed, linked and published with the rest, and `jarvis symbol`, `jarvis search-code` and the
MCP tools get-symbol and search-code answer about it. The comment on lumen#7 names
`clamp_future()`; the commit that introduced it fixes #7; post_reading calls clamp_future,
dedupe_key and seen (scripts/make_sample_repo.py)."""

import json

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from jarvis_cli.main import cli
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.mcp_server import build_server

pytestmark = pytest.mark.slow

CLOCK, API = "src/lumen/ingest/clock.py", "src/lumen/ingest/api.py"
CLAMP = f"symbol:lumen/{CLOCK}::clamp_future"
CLAMP_COMMIT = "commit:lumen/1d2941dd8da851e3619af3e53eda2545fea511ba"  # "Fixes #7"
ISSUE = "ticket:lumen-github/lumen#7"


@pytest.fixture(scope="module")
def project(published_project):
    kb = KnowledgeBase(published_project)
    yield published_project, kb
    kb.close()


def _cli(config, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--config", str(config.config_path), *args],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_function_s_definition_callers_and_story(project):
    config, _ = project
    answer = json.loads(_cli(config, "symbol", "clamp_future", "--json"))
    definition = answer["symbol"]
    assert (definition["key"], definition["file"], definition["kind"]) == (
        CLAMP, CLOCK, "function")
    assert definition["code"].startswith("def clamp_future(ts: datetime, max_skew_seconds")
    assert "post_reading" in [caller["title"] for caller in answer["callers"]]
    [call] = [caller for caller in answer["callers"] if caller["title"] == "post_reading"]
    assert (call["file"], call["confidence"], call["path"]) == (
        API, "high", f"{API}::post_reading")
    assert answer["commits_by"] == "symbol"
    assert CLAMP_COMMIT in [commit["key"] for commit in answer["commits"]]
    [ticket] = [t for t in answer["tickets"] if t["key"] == ISSUE]
    assert "FIXES" in ticket["relations"] and CLAMP_COMMIT in [
        commit["key"] for commit in ticket["commits"]]
    mention = next(m for m in answer["mentions"] if m["key"] == ISSUE)  # the comment
    assert "`clamp_future()`" in mention["evidence_text"]
    assert (mention["vault"], mention["path"]) == ("lumen-github", "tickets/lumen#7")
    opened = json.loads(_cli(config, "read", definition["path"], "--vault", "lumen", "--json"))
    assert opened["key"] == "code:" + CLAMP.removeprefix("symbol:")
    text = _cli(config, "symbol", "clamp_future")
    assert text.startswith(f"# clamp_future  (function, python, lumen/{CLOCK}:")
    assert f"post_reading  at {API}:" in text


def test_who_calls_dedupe_key_is_post_reading_alone(project):
    _, kb = project
    callers = kb.get_symbol("dedupe_key")["callers"]
    assert [(caller["title"], caller["file"]) for caller in callers] == [("post_reading", API)]
    callees = {callee["title"] for callee in kb.get_symbol("evaluate_once")["callees"]}
    assert "evaluate" in callees


def test_the_mcp_tools_and_graph_search_start_from_the_symbol(project):
    _, kb = project

    async def converse():
        async with Client(build_server(kb)) as client:
            return [await client.call_tool(tool, arguments) for tool, arguments in (
                ("get-symbol", {"name": "clamp_future"}),
                ("search-code", {"query": "clamp readings from the future", "limit": 5}),
                ("search-graph", {"query_note_path": "clamp_future"}),
                ("search-graphrag", {"query": "clamp_future", "limit": 5}))]

    symbol, found, graph, pack = anyio.run(converse)
    assert not any(result.is_error for result in (symbol, found, graph, pack))
    assert symbol.structured_content["symbol"]["key"] == CLAMP
    hits = found.structured_content["results"]
    assert (hits[0]["file"], hits[0]["qualified_name"]) == (CLOCK, "clamp_future")
    assert found.content[0].text.splitlines()[1].startswith(f" 1. {CLOCK}:")
    assert graph.structured_content["center"]["key"] == CLAMP
    assert ISSUE in {edge["src"] for edge in graph.structured_content["relationships"][
        "MENTIONS"]}
    sources = pack.structured_content["sources"]  # code is walked from its symbol's node
    assert sources[0]["key"] == "code:" + CLAMP.removeprefix("symbol:")
    assert ("CALLS", f"code:lumen/{API}::post_reading") in {
        (edge["relation"], edge["other"]) for edge in sources[0]["evidence"]}
