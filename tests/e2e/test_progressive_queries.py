"""A version published before its embeddings are done (issue 14's progressive publish), made
with the real pipeline: semantic, hybrid and GraphRAG answers say how far the embeddings are
and fall back to keyword results, in the readable output, the JSON and the MCP text; keyword
search, graph search, read-note, analytics and list-vaults answer as usual. Then the
embeddings finish, the next version is published, and the note goes away."""

import json

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from jarvis_cli.main import cli
from jarvis_core.stores import serving
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.mcp_server import build_server
from tests.pipeline_helpers import data_copy
from tests.query_helpers import DEDUPE_THREAD, documents_config, publish_partially

pytestmark = pytest.mark.slow

QUERY = "dedupe key for readings"


@pytest.fixture(scope="module")
def partial(tmp_path_factory):
    """Mail, Confluence and a small vault indexed, only the vault's embeddings made."""
    with pytest.MonkeyPatch.context() as env:
        for name in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
            env.delenv(name, raising=False)
        config = documents_config(tmp_path_factory.mktemp("progressive"))
        publish_partially(config, embedded=("notes",))
    kb = KnowledgeBase(config)
    yield config, kb
    kb.close()


def _progress(config) -> tuple[int, int]:
    manifest = serving.current_version(config.data_dir).manifest
    return sum(manifest["vectors"].values()), manifest["chunks"]


def test_the_version_is_published_with_part_of_its_embeddings(partial):
    config, kb = partial
    manifest = serving.current_version(config.data_dir).manifest
    done, total = _progress(config)
    assert manifest["vectors_complete"] is False
    assert manifest["vectors"] == {"notes": 2} and 0 < done < total
    assert kb.snapshots.current().embeddings == {
        "complete": False, "done": 2, "total": total,
        "message": f"embeddings 2 of {total} chunks: keyword results until every chunk has "
                   "its vector"}


def test_semantic_search_answers_with_keyword_results_and_says_so(partial):
    config, kb = partial
    results = kb.search_semantic(QUERY, limit=5)
    keyword = kb.search_vault(QUERY, search_content=True, limit=5)
    assert [r.chunk_id for r in results] == [hit.chunk_id for hit in keyword]
    assert results[0].path == f"threads/{DEDUPE_THREAD}"  # not embedded, found by keyword
    assert results.embeddings["complete"] is False
    assert results.embeddings["message"].startswith("embeddings 2 of ")


def test_hybrid_search_and_graphrag_use_their_keyword_leg(partial):
    _, kb = partial
    hybrid = kb.search_hybrid(QUERY, limit=5, alpha=0.7)
    assert hybrid and all(hit.semantic_rank is None and hit.keyword_rank for hit in hybrid)
    assert {hit.fusion for hit in hybrid} == {"keyword only"}
    assert [hit.keyword_rank for hit in hybrid] == sorted(hit.keyword_rank for hit in hybrid)
    pack = kb.search_graphrag(QUERY, limit=3)
    assert pack["embeddings"]["complete"] is False
    keyword_documents = {(hit.vault, hit.path)
                         for hit in kb.search_vault(QUERY, search_content=True, limit=50)}
    found = {(s["vault"], s["path"]) for s in pack["sources"] if s["found_by"] == "search"}
    assert ("lumen-mail", f"threads/{DEDUPE_THREAD}") in found <= keyword_documents


def test_everything_else_answers_as_usual(partial):
    _, kb = partial
    assert kb.search_vault("Dedupe")[0].match == "name"
    graph = kb.search_graph("Dedupe")
    assert graph["available"] and graph["path"] == "Dedupe.md"
    thread = kb.read_note(DEDUPE_THREAD)
    assert thread["kind"] == "email" and "boot_id" in thread["content"]
    assert kb.read_note("Sleep")["content"].startswith("# Sleep")
    assert kb.get_vault_context("notes")["summary"]["notes"] == 2
    listed = kb.list_vaults()
    assert listed["published"]["embeddings"]["complete"] is False
    assert {s["name"]: s["kind"] for s in listed["vaults"] + listed["other_sources"]} == {
        "notes": "vault", "lumen-mail": "mail", "lumen-wiki": "confluence"}


def test_readable_and_json_output_carry_the_note(partial):
    config, _ = partial
    done, total = _progress(config)
    note = f"note: embeddings {done:,} of {total:,} chunks"

    def jarvis(*args: str):
        result = CliRunner().invoke(cli, ["--config", str(config.config_path), *args],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    assert jarvis("search", QUERY).output.startswith(note)
    assert jarvis("hybrid", QUERY).output.startswith(note)
    assert note in jarvis("graphrag", QUERY).output
    context_only = jarvis("graphrag", QUERY, "--context")
    assert note in context_only.stderr and note not in context_only.stdout
    assert note in jarvis("status").output and note in jarvis("vaults").output
    as_json = json.loads(jarvis("search", QUERY, "--json").stdout)
    assert as_json["embeddings"] == {"complete": False, "done": done, "total": total,
                                     "message": note.removeprefix("note: ") + ": keyword "
                                     "results until every chunk has its vector"}
    assert json.loads(jarvis("hybrid", QUERY, "--json").stdout)["embeddings"]["done"] == done
    assert "note: " not in jarvis("keyword", QUERY, "--content").output


def test_mcp_answers_carry_the_note(partial):
    config, kb = partial
    done, total = _progress(config)

    async def converse():
        async with Client(build_server(kb)) as client:
            return {tool: await client.call_tool(tool, {"query": QUERY, "limit": 3})
                    for tool in ("search-semantic", "search-hybrid", "search-graphrag")}

    for tool, result in anyio.run(converse).items():
        assert not result.is_error, (tool, result)
        assert result.content[0].text.startswith(
            f"note: embeddings {done:,} of {total:,} chunks"), tool
        assert result.structured_content["embeddings"]["complete"] is False, tool


def test_the_next_version_is_complete_and_answers_semantically(partial, tmp_path):
    """Embedding the rest and publishing again (what `jarvis refresh` does next) ends the
    fallback: dense results, both legs of hybrid search, no note. On a copy of the partial
    version's data, the module's being read by the other tests."""
    config = data_copy(partial[0], tmp_path)
    kb = KnowledgeBase(config)
    try:
        assert kb.search_semantic(QUERY).embeddings["done"] == 2  # the notes' alone
        publish_partially(config, embedded=tuple(config.source_names))
        done, total = _progress(config)
        assert done == total
        results = kb.search_semantic(QUERY, limit=5)
        assert results.embeddings == {"complete": True, "done": total, "total": total,
                                      "message": None}
        assert all(0 < r.score <= 1 for r in results)  # cosine, not BM25
        hybrid = kb.search_hybrid(QUERY, limit=5)
        assert {hit.fusion for hit in hybrid} == {"rrf"}
        assert any(hit.semantic_rank for hit in hybrid)
    finally:
        kb.close()
