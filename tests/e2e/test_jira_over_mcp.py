"""A real Jira export (two issues of a public project, tests/data/jira-ac) added beside the
published sample vault by `jarvis refresh --source`, then queried over MCP by the SDK's own
client over stdio: every filter with notes and tickets both to choose from, so each has hits
to keep and hits to drop; and the ticket a question describes found among the notes and
read back through MCP, its own fields, people, link and text."""

import json

import anyio
import pytest
import yaml
from click.testing import CliRunner

from jarvis_cli.main import cli
from tests.pipeline_helpers import PROJECT_ROOT, private_copy
from tests.query_helpers import JARVIS, served

pytestmark = pytest.mark.slow

JIRA_EXPORT = PROJECT_ROOT / "tests" / "data" / "jira-ac"  # AC-471 duplicates AC-1188
TICKETS = "appc-jira"
# Answered by the vault's notes on station locations (dated 2026) and by the tickets on a
# geocoder swapping latitude and longitude (last updated November 2015 and March 2016).
MIXED = "location of a station: latitude and longitude"
FILTERED = {
    "semantic_mixed": ("search-semantic", {"query": MIXED, "limit": 10}),
    "semantic_in_vault": ("search-semantic", {"query": MIXED, "vault": "sample", "limit": 10}),
    "hybrid_mixed": ("search-hybrid", {"query": MIXED, "limit": 10}),
    "hybrid_in_source": ("search-hybrid", {"query": MIXED, "vault": TICKETS, "limit": 10}),
    "hybrid_notes": ("search-hybrid", {"query": MIXED, "alpha": 0.5, "limit": 10,
                                       "source_types": ["note"]}),
    "hybrid_tickets": ("search-hybrid", {"query": MIXED, "limit": 10,
                                         "source_types": ["ticket"]}),
    "hybrid_recent": ("search-hybrid", {"query": MIXED, "limit": 10,
                                        "modified_after": "2020-01-01"}),
    "hybrid_2015": ("search-hybrid", {"query": MIXED, "limit": 10,
                                      "modified_after": "2015-01-01",
                                      "modified_before": "2016-01-01"}),
    "vault_mixed": ("search-vault", {"query": MIXED, "search_content": True, "limit": 10}),
    "vault_notes": ("search-vault", {"query": MIXED, "search_content": True, "limit": 10,
                                     "source_types": ["note"]}),
    "graphrag_tickets": ("search-graphrag", {"query": MIXED, "limit": 5,
                                             "source_types": ["ticket"]}),
}
QUESTION = "Android geocoder returns latitude and longitude the wrong way round"


@pytest.fixture(scope="module")
def published(published_sample, tmp_path_factory):
    """The published sample, copied, with the Jira export configured beside its vault and
    added by `jarvis refresh --source` (the two tickets read, chunked, indexed, linked and
    embedded, then published with the notes)."""
    config = private_copy(published_sample, tmp_path_factory.mktemp("jira-mcp"))
    settings = yaml.safe_load(config.config_path.read_text())
    config.config_path.write_text(yaml.safe_dump(
        {**settings, "tickets": {TICKETS: str(JIRA_EXPORT)}}))
    with pytest.MonkeyPatch.context() as env:
        for name in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
            env.delenv(name, raising=False)
        refreshed = CliRunner().invoke(cli, ["--config", str(config.config_path), "refresh",
                                             "--source", TICKETS, "--json"],
                                       catch_exceptions=False)
    assert refreshed.exit_code == 0, refreshed.output
    report = json.loads(refreshed.stdout)
    [tickets] = report["sources"]
    assert report["ok"] and tickets["layers"]["raw_tickets"]["new"] == 2, report
    return config


@pytest.fixture(scope="module")
def answers(published, tmp_path_factory):
    """One `jarvis serve` session: every filtered search; then a search for QUESTION, and its
    top hit read back by a graph search centred on its key (the hit's path ends with it) and
    as the resource its source and path name."""
    async def converse():
        command = [JARVIS, "--config", str(published.config_path), "serve"]
        async with served(command, tmp_path_factory.mktemp("logs") / "stderr.log") as session:
            results = {label: await session.call_tool(*call) for label, call in FILTERED.items()}
            found = await session.call_tool("search-hybrid", {"query": QUESTION, "limit": 5})
            hit = found.structured_content["results"][0]
            graph = await session.call_tool(
                "search-graph", {"query_note_path": hit["path"].rsplit("/", 1)[-1]})
            document = await session.read_resource(f"jarvis://{hit['vault']}/{hit['path']}")
        return results, hit, graph, document

    return anyio.run(converse)


def found(answers, label: str, field: str = "source_type") -> set[str]:
    """The ``field`` values of a filtered search's hits, of which there must be some."""
    result = answers[0][label]
    assert not result.is_error, result.content[0].text
    data = result.structured_content
    hits = data["results"] if "results" in data else data["sources"]
    assert hits, label
    return {hit[field] for hit in hits}


def test_filters_keep_the_sources_kinds_and_dates_asked_for_and_drop_the_rest(answers):
    assert found(answers, "semantic_mixed", "vault") == {"sample", TICKETS}
    assert found(answers, "semantic_in_vault", "vault") == {"sample"}
    assert found(answers, "hybrid_mixed", "vault") == {"sample", TICKETS}
    assert found(answers, "hybrid_in_source", "vault") == {TICKETS}
    assert found(answers, "hybrid_mixed") == found(answers, "vault_mixed") == {"note", "ticket"}
    assert found(answers, "hybrid_notes") == found(answers, "vault_notes") == {"note"}
    assert found(answers, "hybrid_notes", "fusion") == {"alpha=0.5"}
    assert found(answers, "hybrid_tickets") == found(answers, "graphrag_tickets") == {"ticket"}
    assert found(answers, "hybrid_tickets", "path") == {"tickets/AC-471", "tickets/AC-1188"}
    assert found(answers, "hybrid_recent") == {"note"}
    assert found(answers, "hybrid_2015", "path") == {"tickets/AC-471"}


def test_a_ticket_is_found_by_what_it_reports_and_read_back_over_mcp(answers):
    """What the issue's JSON says comes back: its summary as the title, its status, type,
    labels, components and dates, its assignee, reporter and link, and its description with
    the wiki markup read into markdown."""
    _, hit, graph, document = answers
    fields = json.loads((JIRA_EXPORT / "AC-471.json").read_text())["fields"]
    assert (hit["source_type"], hit["vault"], hit["path"]) == ("ticket", TICKETS,
                                                               "tickets/AC-471")
    assert hit["title"] == f"AC-471: {fields['summary']}"
    assert not graph.is_error, graph.content[0].text
    center, relationships = (graph.structured_content["center"],
                             graph.structured_content["relationships"])
    assert (center["key"], center["title"]) == (f"ticket:{TICKETS}/AC-471", hit["title"])
    properties = center["properties"]
    assert (properties["status"], properties["type"]) == (fields["status"]["name"],
                                                          fields["issuetype"]["name"])
    assert properties["labels"] == fields["labels"]
    assert properties["components"] == [c["name"] for c in fields["components"]]
    assert properties["created"] == fields["created"][:19]  # "2015-10-16T20:20:24.000+0000"

    def linked(relation: str) -> set[str]:
        return {edge["dst_title"] for edge in relationships[relation]
                if edge["src"] == f"ticket:{TICKETS}/AC-471"}

    assert linked("ASSIGNED_TO") == {fields["assignee"]["displayName"]}
    assert linked("REPORTED_BY") == {fields["reporter"]["displayName"]}
    assert linked("TAGGED") == set(fields["labels"])
    [link] = fields["issuelinks"]
    assert link["type"]["outward"] == "duplicates" and linked("DUPLICATES") == {
        f"{link['outwardIssue']['key']}: {link['outwardIssue']['fields']['summary']}"}
    [content] = document.contents
    assert content.mime_type == "text/markdown"
    assert "The geocoder return value is correct on iOS." in content.text
    assert "`Ti.Geolocation.forwardGeocoder`" in content.text  # {{...}}
    assert "```\n Ti.Geolocation.forwardGeocoder('Cleveland, OH'); \n```" in content.text
    assert "{code}" not in content.text and "{{" not in content.text
