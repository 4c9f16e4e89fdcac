"""Every hit opens (issue 26): on the shipped sample configuration (all five kinds of source),
the first search hit of each kind of document is opened by its path and vault and by its
bare identifier, through `jarvis read` and the MCP tool under both its names, in one shape:
its key, kind, text as it was indexed (a note's as it is on disk) and its kind's details."""

import json

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from jarvis_cli.main import cli
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.mcp_server import build_server
from tests.pipeline_helpers import rows

pytestmark = pytest.mark.slow

QUERY = "dedupe key for readings"
FIELDS = {"kind", "vault", "path", "key", "title", "created_at", "modified_at", "tags", "named",
          "details", "warnings", "published", "links", "backlinks", "content"}


def _identifier(config, kind: str, document: dict) -> str:
    """The name a person would type for the document: what its kind calls it."""
    if kind == "note":
        return document["title"]
    if kind == "commit":
        return document["names"][0][:7]
    if kind == "repo_doc":
        return document["path"]
    if kind == "ticket":
        return document["title"].split(": ", 1)[0]
    if kind == "email":  # a later message's id, in angle brackets, opens its thread
        return "<" + rows(config, "SELECT message_id FROM mail_messages WHERE source = ? AND "
                                  "'threads/' || thread_id = ? ORDER BY sent_at DESC LIMIT 1",
                          [document["source"], document["path"]])[0][0] + ">"
    return document["names"][0]  # a page's id


def _details_shown(kind: str, details: dict) -> bool:
    """What opening shows of each kind beyond its text."""
    return {
        "note": lambda: details["size_bytes"] > 0 and "frontmatter" in details,
        "commit": lambda: "<" in details["author"] and details["files"] and all(
            isinstance(f["additions"], int) and isinstance(f["deletions"], int)
            for f in details["files"]),
        "repo_doc": lambda: details["language"] == "Markdown",
        "ticket": lambda: details["status"] and "issue_links" in details,
        "email": lambda: len(details["messages"]) > 1 and details["participants"],
        "page": lambda: details["space"] and details["version"],
    }[kind]()


@pytest.fixture(scope="module")
def project(published_project):
    kb = KnowledgeBase(published_project)
    yield published_project, kb
    kb.close()


def _cli(config, *args: str):
    result = CliRunner().invoke(cli, ["--config", str(config.config_path), "read", *args],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def _mcp(kb, calls: list[dict]):
    async def converse():
        async with Client(build_server(kb)) as client:
            return [await client.call_tool(tool, arguments)
                    for arguments in calls for tool in ("read-note", "read")]
    return anyio.run(converse)


@pytest.mark.parametrize("kind", ["note", "commit", "repo_doc", "ticket", "email", "page"])
def test_the_first_hit_of_each_kind_opens_by_path_and_by_identifier(project, kind):
    config, kb = project
    hit = kb.search_hybrid(QUERY if kind != "repo_doc" else "Lumen layout",
                           source_types=[kind], limit=1)[0]
    [values] = rows(config, "SELECT source, doc_key, path, title, names FROM documents "
                            "WHERE source = ? AND path = ?", [hit.vault, hit.path])
    document = dict(zip(("source", "doc_key", "path", "title", "names"), values, strict=True))
    select = config.kind_of(hit.vault).documents
    [(indexed,)] = rows(config, " UNION ALL ".join(
        f"SELECT text FROM ({d.select}) WHERE doc_key = $2" for d in select),
        [hit.vault, document["doc_key"]])
    identifier = _identifier(config, kind, document)
    by_path, by_name = {"path": hit.path, "vault": hit.vault}, {"path": identifier}

    answers = [json.loads(_cli(config, hit.path, "--vault", hit.vault, "--json")),
               json.loads(_cli(config, identifier, "--json"))]
    results = _mcp(kb, [by_path, by_name])
    assert not any(result.is_error for result in results), results
    answers += [result.structured_content for result in results]
    for answer in answers:
        assert FIELDS <= set(answer)
        assert (answer["kind"], answer["vault"], answer["path"], answer["key"]) == (
            kind, hit.vault, hit.path, document["doc_key"]), identifier
        assert " ".join(indexed.split()) in " ".join(answer["content"].split())
        assert answer["published"] and answer["backlinks"] is not None
        assert _details_shown(kind, answer["details"]), answer["details"]
    assert answers[0]["named"] is None
    for result in results:
        assert result.content[0].text.startswith(f"# {document['title']}  ({hit.vault}/")
    text = _cli(config, identifier)
    assert text.startswith(f"# {document['title']}  ({hit.vault}/{hit.path}, {kind}")
    assert f"key: {document['doc_key']}" in text
