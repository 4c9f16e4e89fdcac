"""Ticket export parsing: Jira REST (v2 wiki markup, v3 ADF, search pages), GitHub REST
issues, pull requests and comment files, and bad input reported per file and issue."""

import json
import shutil
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from jarvis_core.sources import registry
from jarvis_core.sources.tickets.export import decode_json_bytes, parse_file, read_ticket_set
from jarvis_core.sources.tickets.fields import TicketError, content_hash
from jarvis_core.sources.tickets.graph import EXTRACTOR as TICKETS_EXTRACTOR
from jarvis_core.sources.tickets.graph import extract_ticket_graph
from jarvis_core.stores import tables
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from tests.graph_helpers import graph_rows, synced, write_rows

SAMPLE_TICKETS = Path(__file__).resolve().parents[2] / "sample_data" / "tickets"


@pytest.fixture(scope="module")
def jira():
    return read_ticket_set(SAMPLE_TICKETS / "jira", "lumen-jira")


@pytest.fixture(scope="module")
def github():
    return read_ticket_set(SAMPLE_TICKETS / "github", "lumen-github", repo="lumen")


def test_sample_jira_export_has_all_twelve_tickets_from_files_and_search_pages(jira):
    assert sorted(jira.tickets, key=lambda key: int(key.split("-")[1])) == [
        f"LUM-{n}" for n in range(1, 13)]
    assert jira.failures == []
    assert jira.tickets["LUM-4"]["path"] == "LUM-4.json"
    assert jira.tickets["LUM-7"]["path"] == "search-milestone-1.json"
    assert len(jira.files) == 5


def test_sample_ticket_meanings_follow_the_vault_feature_map(jira):
    summaries = {key: ticket["summary"].lower() for key, ticket in jira.tickets.items()}
    for key, words in {"LUM-1": "ingest api skeleton", "LUM-2": "hypertable",
                       "LUM-3": "api key", "LUM-4": "idempotent", "LUM-5": "compression",
                       "LUM-6": "alert rule", "LUM-7": "station overview",
                       "LUM-8": "downsampling", "LUM-9": "rate limiting",
                       "LUM-10": "backlog", "LUM-11": "calibration",
                       "LUM-12": "cbor batch"}.items():
        assert words in summaries[key], key


def test_jira_fields_are_normalised(jira):
    ticket = jira.tickets["LUM-4"]
    assert (ticket["system"], ticket["status"], ticket["type"], ticket["priority"]) == (
        "jira", "In Review", "Story", "Highest")
    assert ticket["labels"] == ["ingest", "data-quality"]
    assert ticket["components"] == ["Ingest API", "Storage"]
    assert ticket["fix_versions"] == ["Milestone 2"]
    assert ticket["assignee"] == {"name": "Maya Chen", "email": "maya.chen@lumen.example",
                                  "account": "5f1a0c2b7d3e4a0011aa0001"}
    assert ticket["reporter"]["name"] == "Lena Fischer"
    assert ticket["created_at"] == datetime(2026, 10, 9, 8, 0)  # +0200 -> UTC
    assert ticket["resolved_at"] is None
    assert jira.tickets["LUM-1"]["resolved_at"] == datetime(2026, 10, 28, 15, 40, 11)
    assert ticket["url"] == "https://lumen.atlassian.net/browse/LUM-4"
    assert [c["author"]["name"] for c in ticket["comments"]] == [
        "Sam Novak", "Maya Chen", "Sam Novak"]


def test_wiki_markup_becomes_markdown(jira):
    text = jira.tickets["LUM-4"]["description"]
    assert "## Problem" in text and "h2." not in text
    assert "`(station_id, observed_at, seq)`" in text and "{{" not in text
    assert "```python" in text and "{code" not in text
    table = jira.tickets["LUM-3"]["description"]
    assert "|Case|Response|" in table and "||" not in table


def test_jira_v3_document_format_becomes_text(jira):
    ticket = jira.tickets["LUM-12"]
    assert "## Protocol v2" in ticket["description"]
    assert "- Firmware 1.4 release for ESP32 stations" in ticket["description"]
    assert "February" in ticket["comments"][0]["body"]
    assert ticket["assignee"] is None


def test_issue_links_keep_type_and_direction(jira):
    assert jira.tickets["LUM-6"]["links"] == [
        {"type": "Blocks", "direction": "inward", "phrase": "is blocked by",
         "outward": "blocks", "target": "LUM-4"}]
    assert {(link["target"], link["direction"]) for link in jira.tickets["LUM-4"]["links"]} \
        == {("LUM-6", "outward"), ("LUM-11", "outward")}
    duplicate = [link for link in jira.tickets["LUM-10"]["links"] if link["type"] == "Duplicate"]
    assert duplicate == [{"type": "Duplicate", "direction": "inward",
                          "phrase": "is duplicated by", "outward": "duplicates",
                          "target": "LUM-13"}]


def test_github_issues_pull_requests_and_comment_file(github):
    assert sorted(github.tickets) == ["lumen#15", "lumen#16", "lumen#7"]
    issue = github.tickets["lumen#7"]
    assert (issue["system"], issue["number"], issue["repo"], issue["status"], issue["type"]) == (
        "github", 7, "lumen", "open", "issue")
    assert issue["labels"] == ["bug", "firmware"]
    assert issue["reporter"] == {"name": None, "email": None, "account": "stationfan"}
    assert issue["assignee"]["account"] == "maya-chen"
    assert [c["author"]["account"] for c in issue["comments"]] == ["maya-chen", "stationfan"]
    assert issue["url"] == "https://github.com/example/lumen/issues/7"
    pull = github.tickets["lumen#16"]
    assert pull["is_pull_request"] and pull["type"] == "pull request"
    assert pull["status"] == "merged"
    assert github.tickets["lumen#15"]["fix_versions"] == ["Milestone 2"]
    assert not github.tickets["lumen#15"]["is_pull_request"]


def test_github_repo_defaults_to_the_repository_url():
    data = json.dumps([{"number": 3, "title": "Crash", "state": "open",
                        "repository_url": "https://api.github.com/repos/acme/widgets"}]).encode()
    [ticket] = parse_file(data, "issues.json", source="s").tickets
    assert ticket["key"] == "acme/widgets#3"


def test_document_text_holds_facts_description_and_comments(jira, github):
    text = jira.tickets["LUM-6"]["text"]
    assert text.startswith("Status: Blocked · Type: Story · Priority: High")
    assert "## Comments" in text and "### Lena Fischer 2026-11-04" in text
    assert "LUM-4 lands" in text
    assert "Fixes #15" in github.tickets["lumen#16"]["text"]


def test_content_hash_ignores_where_a_ticket_was_read(jira):
    ticket = dict(jira.tickets["LUM-4"])
    moved = {**ticket, "path": "elsewhere.json", "source": "other"}
    assert content_hash(moved) == ticket["content_hash"]
    assert content_hash({**ticket, "status": "Done"}) != ticket["content_hash"]


def test_malformed_files_and_issues_are_reported_and_the_rest_is_read(tmp_path):
    good = json.loads((SAMPLE_TICKETS / "jira" / "LUM-6.json").read_text(encoding="utf-8"))
    (tmp_path / "good.json").write_text(json.dumps(good), encoding="utf-8")
    (tmp_path / "broken.json").write_text('{"key": "LUM-1", "fields": {', encoding="utf-8")
    (tmp_path / "other.json").write_text('{"hello": "world"}', encoding="utf-8")
    page = {"issues": [
        {"key": "LUM-20", "fields": {"summary": "fine"}},
        {"key": "LUM-21", "fields": {"description": "no summary"}},
        {"fields": {"summary": "no key"}},
        "not an object",
        {"key": "LUM-22", "fields": {"summary": "bad date", "created": "yesterday"}},
    ]}
    (tmp_path / "page.json").write_text(json.dumps(page), encoding="utf-8")
    (tmp_path / ".hidden.json").write_text("garbage", encoding="utf-8")
    result = read_ticket_set(tmp_path, "t")
    assert sorted(result.tickets) == ["LUM-20", "LUM-6"]
    failures = dict(result.failures)
    assert failures["broken.json"].startswith("not valid JSON: ")
    assert "line 1 column" in failures["broken.json"]
    assert "neither a Jira issue" in failures["other.json"] and "hello" in failures["other.json"]
    assert failures["page.json#issues[1]"] == "missing or empty 'fields.summary'"
    assert failures["page.json#issues[2]"] == "missing or empty 'key'"
    assert failures["page.json#issues[3]"] == "issue 3 is a str, not an object"
    assert "created is not a date" in failures["page.json#issues[4]"]
    assert len(failures) == 6


def test_github_issue_without_number_or_repo_fails_alone():
    data = json.dumps([{"title": "no number"}, {"number": 2, "title": "no repo"},
                       {"number": 4, "title": "ok", "html_url":
                        "https://github.com/acme/widgets/issues/4"}]).encode()
    parsed = parse_file(data, "gh.json", source="s")
    assert [t["key"] for t in parsed.tickets] == ["acme/widgets#4"]
    assert parsed.failures[0] == ("gh.json#[0]", "missing or invalid 'number': None")
    assert "repository unknown" in parsed.failures[1][1]


def test_duplicate_keys_keep_the_most_recently_updated_copy(tmp_path):
    def issue(summary, updated):
        return {"key": "LUM-1", "fields": {"summary": summary, "updated": updated}}
    (tmp_path / "a.json").write_text(json.dumps(issue("old", "2026-01-01T00:00:00.000+0000")))
    (tmp_path / "b.json").write_text(json.dumps(issue("new", "2026-02-01T00:00:00.000+0000")))
    result = read_ticket_set(tmp_path, "t")
    assert result.tickets["LUM-1"]["summary"] == "new"
    assert result.tickets["LUM-1"]["warnings"] == ["also in a.json (older copy ignored)"]


def test_encodings_utf16_bom_and_legacy_bytes_with_a_warning():
    text = json.dumps({"key": "LUM-1", "fields": {"summary": "Café größer"}},
                      ensure_ascii=False)
    assert decode_json_bytes(text.encode("utf-16")) == (text, [])
    assert decode_json_bytes(b"\xef\xbb\xbf" + text.encode()) == (text, [])
    decoded, warnings = decode_json_bytes(text.encode("cp1252"))
    assert json.loads(decoded)["fields"]["summary"] == "Café größer"
    assert warnings and warnings[0].startswith("not UTF-8")
    [ticket] = parse_file(text.encode("cp1252"), "legacy.json", source="s").tickets
    assert ticket["warnings"] and ticket["summary"] == "Café größer"


def test_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(TicketError, match="does not exist"):
        read_ticket_set(tmp_path / "nope", "t")


def test_a_declared_format_rejects_files_of_the_other_format(tmp_path):
    shutil.copy(SAMPLE_TICKETS / "jira" / "LUM-6.json", tmp_path)
    shutil.copy(SAMPLE_TICKETS / "github" / "issues.json", tmp_path)
    result = read_ticket_set(tmp_path, "t", expected="jira")
    assert sorted(result.tickets) == ["LUM-6"]
    assert result.failures == [
        ("issues.json", "holds GitHub issues, but the ticket set's format is jira")]


def whole_text_chunks(ticket_set, source: str) -> list[dict]:
    return [{"chunk_id": f"chunk-{key}", "doc_key": f"ticket:{source}/{key}", "char_start": 0,
             "char_end": len(ticket["text"])} for key, ticket in ticket_set.tickets.items()]


def test_ticket_graph_normalises_link_direction_and_defers_outside_targets(jira):
    graph = extract_ticket_graph("j", list(jira.tickets.values()), whole_text_chunks(jira, "j"))
    blocks = {(e.src, e.dst, e.origin) for e in graph.edges if e.relation == "BLOCKS"}
    assert ("ticket:j/LUM-4", "ticket:j/LUM-6", "ticket:j/LUM-6") in blocks   # "is blocked by"
    assert ("ticket:j/LUM-4", "ticket:j/LUM-6", "ticket:j/LUM-4") in blocks   # "blocks"
    [edge] = [e for e in graph.edges if e.origin == "ticket:j/LUM-6" and e.relation == "BLOCKS"]
    assert edge.evidence == ("chunk-LUM-6",) and "is blocked by LUM-4" in edge.evidence_text
    [duplicate] = [r for r in graph.references if r.target == "LUM-13"]
    assert (duplicate.src, duplicate.relation, duplicate.inverse) == (
        "ticket:j/LUM-10", "DUPLICATES", True)
    titles = {n.key: n.title for n in graph.nodes if n.type == "person"}
    assert titles["person:maya.chen@lumen.example"] == "Maya Chen"
    assert {n.key for n in graph.nodes if n.type == "ticket"} == {
        f"ticket:j/LUM-{n}" for n in range(1, 13)}
    # text references inside the set are edges, to other sets references
    assert ("ticket:j/LUM-1", "MENTIONS", "ticket:j/LUM-3") in {
        (e.src, e.relation, e.dst) for e in graph.edges}
    assert {(r.kind, r.target) for r in graph.references if r.origin == "ticket:j/LUM-4"} == {
        ("github", "lumen#7"), ("path", "src/lumen/ingest/dedupe.py"),
        ("symbol", "observed_at"), ("symbol", "ingest_duplicates_total")}  # {{backticked}}


def test_ticket_graph_fingerprints_change_only_for_the_edited_ticket(jira):
    tickets = list(jira.tickets.values())
    before = extract_ticket_graph("j", tickets, whole_text_chunks(jira, "j")).fingerprints
    edited = [{**t, "summary": "Alert engine, frost first"} if t["key"] == "LUM-6" else t
              for t in tickets]
    after = extract_ticket_graph("j", edited, whole_text_chunks(jira, "j")).fingerprints
    assert {origin for origin in before if before[origin] != after[origin]} == {"ticket:j/LUM-6"}


def test_github_graph_has_fixes_within_the_set_and_references_to_jira(github):
    graph = extract_ticket_graph("gh", list(github.tickets.values()),
                                 whole_text_chunks(github, "gh"))
    assert ("ticket:gh/lumen#16", "FIXES", "ticket:gh/lumen#15") in {
        (e.src, e.relation, e.dst) for e in graph.edges}
    assert {(r.origin, r.target) for r in graph.references} >= {
        ("ticket:gh/lumen#7", "LUM-12"), ("ticket:gh/lumen#15", "LUM-7")}
    node = next(n for n in graph.nodes if n.key == "ticket:gh/lumen#16")
    assert node.properties["is_pull_request"] and node.properties["repo_full"] == "example/lumen"


def test_files_that_hash_as_stored_give_their_stored_tickets_unparsed(tmp_path, jira):
    shutil.copy(SAMPLE_TICKETS / "jira" / "search-milestone-1.json", tmp_path)
    shutil.copy(SAMPLE_TICKETS / "jira" / "LUM-6.json", tmp_path)
    first = read_ticket_set(tmp_path, "t")
    assert first.file_keys == {"LUM-6.json": ["LUM-6"],
                               "search-milestone-1.json": ["LUM-1", "LUM-2", "LUM-3", "LUM-7"]}
    page = "search-milestone-1.json"
    stored = [{**first.tickets[key], "summary": f"stored {key}"} for key in first.file_keys[page]]
    again = read_ticket_set(tmp_path, "t", reuse={
        page: (first.files[page], stored), "LUM-6.json": ("another hash", [])})
    assert again.reused_files == 1
    assert again.tickets["LUM-1"]["summary"] == "stored LUM-1"  # not parsed again
    assert again.tickets["LUM-6"]["summary"] == first.tickets["LUM-6"]["summary"]  # parsed
    assert again.tickets["LUM-1"]["text"] == first.tickets["LUM-1"]["text"]


@pytest.mark.parametrize("text", [
    "Verified on staging with a station unplugged for 3 hours.",
    "Dates 2026-10-12 and LUM-4, 50 % done; a/b test.\nSecond line\n\nA paragraph.",
    "*bold* and _it_ with {{mono}}", "h2. Heading\n# one\n# two", "- item\n-- nested",
    "a [link|https://example.com] and ??citation??", "smile :) (y) and a <b> & `c`"])
def test_markup_converts_as_jira2markdown_does(text):
    from jira2markdown import convert

    from jarvis_core.sources.tickets.jira import markdown_of
    warnings = []
    assert markdown_of(text, "LUM-1 description", warnings) == convert(text).strip()
    assert warnings == []


def test_a_body_over_the_conversion_budget_is_kept_as_written_with_a_warning(monkeypatch):
    from functools import partial

    from jarvis_core.sources.tickets import jira
    from jarvis_core.sources.tickets.markup import jira_to_markdown

    monkeypatch.setattr(jira, "jira_to_markdown", partial(jira_to_markdown, budget_seconds=0))
    warnings = []
    body = "*" * 200_000
    assert jira.markdown_of(body, "LUM-9 comment 2", warnings) == body
    [warning] = warnings
    assert warning.startswith("LUM-9 comment 2: ") and "budget" in warning


def test_tickets_extracted_a_batch_at_a_time_make_the_graph_one_batch_makes(jira, tmp_path):
    """A ticket citing one of a later batch (LUM-1 names LUM-3: its edge waits for the end),
    then a linked ticket deleted: a ticket at a time writes what one batch writes."""
    tickets = list(jira.tickets.values())
    runs = {}
    for size in (1, 100):
        with duckdb.connect() as conn, SqliteGraphStore(tmp_path / f"{size}.sqlite") as store:
            tables.ensure_schema(conn, registry.declared_tables())
            found = []
            for kept in (tickets, [t for t in tickets if t["key"] != "LUM-6"]):
                write_rows(conn, "j", {"tickets": kept, "chunks": [
                    {**chunk, "path": "export.json"}
                    for chunk in whole_text_chunks(jira, "j")
                    if chunk["doc_key"] in {f"ticket:j/{t['key']}" for t in kept}]})
                run = synced(conn, store, "j", TICKETS_EXTRACTOR, size)
                assert run.dangling == 0
                found.append(graph_rows(conn, store))
                assert ("MENTIONS",) in conn.execute(
                    "SELECT relation FROM graph_edges WHERE src = ? AND dst = ?",
                    ["ticket:j/LUM-1", "ticket:j/LUM-3"]).fetchall()
            assert run.removed == {"ticket:j/LUM-6"}
            runs[size] = found
    assert runs[1] == runs[100]
    assert not any("LUM-6" in str(row) for row in runs[1][1]["store nodes"]
                   + runs[1][1]["graph_nodes"])
