"""The query side of mail and Confluence (issue 15), over the sample mailbox and Confluence
space beside a small vault, refreshed with the real pipeline: source-type filters `email` and
`page` in keyword, hybrid and GraphRAG search; threads and pages read by key, path, id,
Message-ID or title, rebuilt from the published chunks and confined to the configured
sources; list-vaults and `jarvis status` with every kind and its counts; GraphRAG recency
from a thread's last message and a page's last update."""

import json

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from jarvis_cli.main import cli
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.lookup import DocumentNotFound
from jarvis_query.mcp_server import build_server
from jarvis_query.validation import QueryError
from tests.pipeline_helpers import rows, write_config
from tests.query_helpers import (
    DEDUPE_THREAD,
    INGEST_PAGE,
    INGEST_TITLE,
    SAMPLE_CONFLUENCE,
)

pytestmark = pytest.mark.slow

THREAD_KEY = f"thread:lumen-mail/{DEDUPE_THREAD}"
PAGE_KEY = f"page:lumen-wiki/{INGEST_PAGE}"
THIRD_MESSAGE = "CAK7wq2dedupe03.1010@mail.lumen.example"


@pytest.fixture(scope="module")
def published(published_documents):
    kb = KnowledgeBase(published_documents)
    yield published_documents, kb
    kb.close()


def jarvis(config, *args: str):
    result = CliRunner().invoke(cli, ["--config", str(config.config_path), *args],
                                catch_exceptions=False)
    return result


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_source_type_filters_keep_threads_and_pages(published):
    config, kb = published
    for wanted in (["email"], ["page"], ["email", "page"]):
        content = kb.search_vault("dedupe", search_content=True, source_types=wanted)
        names = kb.search_vault("dedupe", source_types=wanted)
        hybrid = kb.search_hybrid("dedupe key decision", source_types=wanted)
        pack = kb.search_graphrag("dedupe key decision", source_types=wanted, limit=5)
        for found in (content, names, hybrid):
            assert found and {hit.source_type for hit in found} <= set(wanted), wanted
        sources = pack["sources"]
        assert sources and {s["source_type"] for s in sources} <= set(wanted), wanted
    unfiltered = kb.search_graphrag("dedupe key decision", limit=10)
    assert "note" in {source["source_type"] for source in unfiltered["sources"]}
    assert kb.search_vault("Dedupe", source_types=["note"])[0].path == "Dedupe.md"
    with pytest.raises(QueryError, match="unknown source type 'mail': source_types are note,"):
        kb.search_hybrid("dedupe", source_types=["mail"])
    for command in ("keyword", "hybrid", "graphrag"):
        shown = json.loads(jarvis(config, command, "dedupe key", "--type", "page",
                                  "--json").stdout)
        hits = shown["results"] if "results" in shown else shown["sources"]
        assert hits and {hit["source_type"] for hit in hits} == {"page"}, command
    refused = jarvis(config, "hybrid", "dedupe", "--type", "mail")
    assert refused.exit_code == 1 and "unknown source type 'mail'" in refused.output


def test_a_thread_is_read_by_key_path_or_any_message_id(published):
    config, kb = published
    [(working_text,)] = rows(config, "SELECT text FROM mail_threads WHERE thread_id = ?",
                             [DEDUPE_THREAD])
    by_key = kb.read_note(THREAD_KEY)
    assert by_key["kind"] == "email" and by_key["vault"] == "lumen-mail"
    assert by_key["path"] == f"threads/{DEDUPE_THREAD}" and by_key["named"] is None
    assert _flat(by_key["content"]) == _flat(working_text)
    messages = by_key["details"]["messages"]
    assert [m["message_id"] for m in messages][2] == THIRD_MESSAGE
    assert messages[1]["attachments"] == ["dedupe-replay-2026-10-08.csv"]
    assert {r for link in by_key["links"] for r in link["relations"]} == {"SENT_TO"}
    assert "person:sam.novak@lumen.example" in {link["key"] for link in by_key["backlinks"]}
    for name, vault in ((f"threads/{DEDUPE_THREAD}", "lumen-mail"), (DEDUPE_THREAD, None),
                        (f"<{THIRD_MESSAGE}>", None), (f"mid:{THIRD_MESSAGE}", "lumen-mail")):
        read = kb.read_note(name, vault)
        assert read["key"] == THREAD_KEY and read["content"] == by_key["content"], name
    assert kb.read_note(THIRD_MESSAGE)["named"] == THIRD_MESSAGE.lower()
    readable = jarvis(config, "read", f"<{THIRD_MESSAGE}>").output
    assert readable.startswith("# Dedupe key for readings")
    assert (f"→ {THIRD_MESSAGE}, sent at: 2026-10-10T07:02:00, from: Daniel Okafor "
            "<daniel.okafor@lumen.example>") in readable


def test_a_page_is_read_by_key_path_id_or_title(published):
    config, kb = published
    [(working_text,)] = rows(config, "SELECT text FROM pages WHERE page_id = ?", [INGEST_PAGE])
    page = kb.read_note(PAGE_KEY)
    details = page["details"]
    assert (page["kind"], page["title"], details["space"]) == ("page", INGEST_TITLE, "LUM")
    assert details["ancestors"] == ["Lumen Home", "Architecture"]
    assert "adr" in page["tags"] and details["author"].startswith("Sam Novak")
    assert _flat(page["content"]) == _flat(working_text)
    assert "PARENT" in {r for link in page["links"] for r in link["relations"]}
    for name, vault in ((INGEST_PAGE, "lumen-wiki"), (f"pages/{INGEST_PAGE}", None),
                        (INGEST_TITLE.upper(), None), (INGEST_PAGE, None)):
        assert kb.read_note(name, vault)["key"] == PAGE_KEY, name
    readable = jarvis(config, "read", INGEST_TITLE).output
    assert "space: LUM\nancestors: Lumen Home, Architecture\n" in readable


def test_mcp_read_note_reads_threads_and_pages(published):
    _, kb = published

    async def converse():
        async with Client(build_server(kb)) as client:
            return (await client.call_tool("read-note", {"path": THIRD_MESSAGE}),
                    await client.call_tool("read-note", {"path": INGEST_PAGE,
                                                         "vault": "lumen-wiki"}),
                    await client.call_tool("read-note", {"path": "page:elsewhere/1"}))

    thread, page, elsewhere = anyio.run(converse)
    assert thread.structured_content["kind"] == "email"
    assert thread.content[0].text.startswith("# Dedupe key for readings")
    assert page.structured_content["key"] == PAGE_KEY
    assert elsewhere.is_error
    assert elsewhere.content[0].text == ("Error: 'page:elsewhere/1' names no document in the "
                                         "sources you can read")


def test_reading_stays_inside_the_configured_sources(published, tmp_path):
    """The published version still holds the mailbox, but a configuration without it reads
    none of its threads (and a repository or ticket set is no place to read from)."""
    config, _ = published
    other = write_config(tmp_path, {"notes": config.sources["notes"].path},
                         confluence={"lumen-wiki": str(SAMPLE_CONFLUENCE)},
                         tickets={"issues": str(tmp_path / "issues.json")},
                         data_dir=str(config.data_dir))
    kb = KnowledgeBase(other)
    try:
        for name in (THREAD_KEY, THIRD_MESSAGE, f"lumen-mail/threads/{DEDUPE_THREAD}"):
            with pytest.raises(DocumentNotFound, match="names no document in the sources you "
                                                       "can read"):
                kb.read_note(name)
        with pytest.raises(QueryError, match="Unknown vault 'lumen-mail'"):
            kb.read_note(DEDUPE_THREAD, vault="lumen-mail")
        with pytest.raises(DocumentNotFound, match="'LUM-4' names no document in 'issues'"):
            kb.read_note("LUM-4", vault="issues")
        assert kb.read_note(PAGE_KEY)["title"] == INGEST_TITLE
    finally:
        kb.close()


def test_sources_are_listed_with_their_kind_and_counts(published):
    config, kb = published
    listed = kb.list_vaults()
    by_name = {s["name"]: s for s in listed["vaults"] + listed["other_sources"]}
    assert by_name["lumen-mail"]["kind"] == "mail"
    assert (by_name["lumen-mail"]["messages"], by_name["lumen-mail"]["threads"]) == (10, 3)
    assert by_name["lumen-wiki"]["kind"] == "confluence" and by_name["lumen-wiki"]["pages"] == 6
    assert by_name["lumen-wiki"]["chunks"]["page"] > 0
    assert by_name["lumen-mail"]["last_ingested_at"] is not None
    vaults = jarvis(config, "vaults").output
    assert "- lumen-mail (mail, " in vaults and "10 messages, 3 threads" in vaults
    assert "- lumen-wiki (confluence, " in vaults and "6 pages" in vaults
    status = json.loads(jarvis(config, "status", "--json").stdout)
    rows_by_name = {row["name"]: row for row in status["sources"]}
    assert (rows_by_name["lumen-mail"]["messages"], rows_by_name["lumen-mail"]["threads"],
            rows_by_name["lumen-wiki"]["pages"]) == (10, 3, 6)
    assert status["totals"]["pages"] == 6 and status["published"]["unreadable"] == []
    readable = jarvis(config, "status").output
    assert "messages" in readable and "threads" in readable and "pages" in readable


def test_graphrag_recency_reads_threads_and_pages(published):
    _, kb = published
    pack = kb.search_graphrag("dedupe key decision", source_types=["email", "page"], limit=6)
    assert {s["source_type"] for s in pack["sources"]} == {"email", "page"}
    for source in pack["sources"]:
        assert source["modified_at"] is not None and source["components"]["recency"] > 0
    newest = max(pack["sources"], key=lambda s: s["modified_at"])
    assert newest["components"]["recency"] == 1.0


def test_graph_search_starts_from_a_thread_or_a_page(published):
    _, kb = published
    thread = kb.search_graph(THREAD_KEY)
    assert thread["available"] and thread["vault"] == "lumen-mail"
    assert {"AUTHORED", "SENT_TO"} <= set(thread["relationships"])
    page = kb.search_graph(PAGE_KEY)
    assert page["available"] and page["path"] == f"pages/{INGEST_PAGE}"
