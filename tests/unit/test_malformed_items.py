"""One bad item never fails its source: every malformed ticket shape from the adversarial
run is read or reported on its own, a note over the link limit keeps the first links, a
huge ticket is cut, and a corrupt commit object is one failure of a repository that still
ingests."""

import _thread
import json
import os
import threading
import time
import zlib

import pytest

from jarvis_core.sources.limits import ItemTooSlow, cpu_time_limit
from jarvis_core.sources.tickets.export import parse_file, read_ticket_set
from jarvis_core.sources.vault.ingest import StoredNotes, plan_ingest
from jarvis_core.sources.vault.scan import scan_vault
from jarvis_core.text.chunking import chunk_document
from jarvis_core.text.tokens import token_counter
from tests.source_helpers import Repo


def _jira(**fields) -> dict:
    return {"key": "LUM-1", "fields": {"summary": "Something", **fields}}


def _parse(document: object):
    return parse_file(json.dumps(document).encode(), "x.json", source="t")


def _adf(*content) -> dict:
    return {"type": "doc", "version": 1, "content": list(content)}


@pytest.mark.parametrize("fields", [
    {"description": _adf({"type": "heading", "attrs": {"level": "high"},
                          "content": [{"type": "text", "text": "Title"}]})},
    {"labels": 5, "components": 7, "fixVersions": "1.0"},
    {"issuelinks": [{"type": "Blocks", "outwardIssue": {"key": "LUM-2"}}]},
    {"issuelinks": {"type": {"name": "Blocks"}, "outwardIssue": {"key": "LUM-2"}}},
    {"issuelinks": [{"type": 3, "inwardIssue": {"key": ["LUM-2"]}}], "parent": {"key": 4}},
    {"assignee": 12, "reporter": ["x"], "status": {"name": {"deep": 1}}},
    {"comment": {"comments": [{"body": 5, "author": "x"}, "not a comment", None]}},
])
def test_malformed_jira_shapes_give_a_ticket(fields):
    parsed = _parse(_jira(**fields))
    assert parsed.failures == [] and [t["key"] for t in parsed.tickets] == ["LUM-1"]


def test_numbers_where_lists_belong_are_read_as_one_value():
    [ticket] = _parse(_jira(labels=5, components={"name": "api"})).tickets
    assert ticket["labels"] == ["5"] and ticket["components"] == ["api"]
    [issue] = _parse({"number": 3, "title": "t", "assignees": 9, "labels": "bug",
                      "html_url": "https://github.com/acme/lumen/issues/3"}).tickets
    assert issue["labels"] == ["bug"] and issue["assignee"] == {
        "name": None, "email": None, "account": "9"}


def test_deeply_nested_json_is_one_reported_file(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "deep-issue.json").write_text(
        json.dumps([_jira(labels=[]), {"key": "LUM-2", "fields": {"summary": "s"}}])
        .replace('"labels": []', '"labels": ' + "[" * 5_000 + "]" * 5_000))
    (tmp_path / "fine.json").write_text(json.dumps(_jira()))
    result = read_ticket_set(tmp_path, "t")
    failures = dict(result.failures)
    assert "nested too deeply" in failures["deep.json"]
    assert set(result.tickets) >= {"LUM-1"}  # fine.json, whatever deep-issue.json became


def test_an_item_no_reader_expected_fails_alone_with_its_error():
    parsed = _parse({"issues": [_jira(summary="ok"), {"key": "LUM-2", "fields": {
        "summary": "s", "created": "2026-13-45"}}, {"key": "LUM-3", "fields": []}]})
    assert [t["key"] for t in parsed.tickets] == ["LUM-1"]
    assert [location for location, _ in parsed.failures] == ["x.json#issues[1]",
                                                             "x.json#issues[2]"]


def test_a_20mb_description_is_cut_before_conversion_with_a_warning(tmp_path):
    (tmp_path / "huge.json").write_text(json.dumps(_jira(
        description="h1. Huge\n" + "word " * 4_000_000,
        comment={"comments": [{"body": "c" * 50_000}, {"body": "later"}]})))
    result = read_ticket_set(tmp_path, "t")
    ticket = result.tickets["LUM-1"]
    kept = len(ticket["description"]) + sum(len(c["body"]) for c in ticket["comments"])
    assert kept <= 200_000  # the default ingest.max_ticket_chars
    assert len(ticket["comments"]) <= 1  # the second comment is past the limit
    chunks = chunk_document(ticket["text"], title="t", doc_key="ticket:LUM-1",
                            counter=token_counter("all-MiniLM-L6-v2"))
    assert len(chunks) < 1_000  # uncut: about 16,000
    assert any("max_ticket_chars" in warning for warning in ticket["warnings"])


def test_a_note_over_the_link_limit_keeps_the_first_links(tmp_path):
    body = " ".join(f"[[Note {i}]]" for i in range(300)) + "\n" + " ".join(
        f"![[img{i}.png]]" for i in range(100))
    (tmp_path / "Big.md").write_text(body)
    plan = plan_ingest("v", scan_vault(tmp_path), StoredNotes.none(), 1_000_000, max_links=40)
    [row] = plan.note_rows
    assert (len(row["wikilinks"]), len(row["embeds"])) == (30, 10)
    assert row["wikilinks"][0]["target"] == "Note 0"
    assert any("max_links_per_note" in warning for warning in row["warnings"])


def test_the_cpu_time_limit_fails_the_item_not_the_run():
    with pytest.raises(ItemTooSlow, match="endless.md took over 0.05 CPU seconds"):
        with cpu_time_limit(0.05, "endless.md"):
            while True:
                pass
    with cpu_time_limit(0.05, "quick.md"):  # the timer is off again afterwards
        sum(range(10))


def test_an_item_over_budget_fails_even_when_the_interrupt_does_not_land(monkeypatch):
    """The watchdog may be kept from the GIL until the block is over, or the interrupt may
    land in code that catches it: the item is over budget and fails all the same."""
    monkeypatch.setattr(_thread, "interrupt_main", lambda signum: None)
    with pytest.raises(ItemTooSlow, match="late.md took over 0.05 CPU seconds"):
        with cpu_time_limit(0.05, "late.md"):
            started = time.thread_time()
            while time.thread_time() - started < 0.2:
                pass


def test_only_the_parsing_threads_own_cpu_time_counts():
    """Another thread's work (the embedder's thread pool, say) does not use up an item's
    budget, and no signal reaches that thread: a process-wide timer's did, and crashed."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    busy = threading.Thread(target=spin)
    busy.start()
    try:
        with cpu_time_limit(0.05, "idle.md"):
            # this thread idles until the other has burnt four times the budget
            burnt, deadline = time.process_time(), time.monotonic() + 60
            while time.process_time() - burnt < 0.2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert time.process_time() - burnt >= 0.2, "the busy thread never ran"
    finally:
        stop.set()
        busy.join()


def test_a_note_over_the_time_limit_fails_alone(tmp_path):
    (tmp_path / "a-small.md").write_text("# Small\n\nhello [[b-slow]] #ops\n")
    (tmp_path / "b-slow.md").write_text("\n".join(
        f"Line {i} with [[Link {i}]], #tag{i}, **bold** and [a link](http://x/{i})"
        for i in range(20_000)))  # about 3 CPU-s to parse
    plan = plan_ingest("v", scan_vault(tmp_path), StoredNotes.none(), 10_000_000,
                       max_item_seconds=0.5)
    assert [row["path"] for row in plan.note_rows] == ["a-small.md"]
    [failure] = plan.failures
    assert failure["path"] == "b-slow.md" and "max_item_seconds" in failure["reason"]


def _corrupt(repo: Repo, sha: str, data: bytes) -> None:
    path = repo.path / ".git" / "objects" / sha[:2] / sha[2:]
    os.chmod(path, 0o644)
    path.write_bytes(data)


@pytest.fixture
def history(tmp_path):
    repo = Repo(tmp_path / "repo")
    shas = [repo.commit(f"Commit {i} LUM-{i + 1}", {f"docs/n{i}.md": f"# Doc {i}\n",
                                                   "README.md": f"readme {i}"})
            for i in range(4)]
    return repo, shas


def test_a_corrupt_commit_object_is_one_failure_and_the_repository_ingests(history):
    repo, shas = history
    _corrupt(repo, shas[1], b"not a zlib stream")
    sync = repo.sync()
    failures = {f["path"]: f["reason"] for f in sync.failures}
    assert f"commits/{shas[1]}" in failures and "cannot be read" in failures[f"commits/{shas[1]}"]
    assert shas[3] in {c.sha for c in sync.new_commits}
    assert {d["path"] for d in sync.docs} == {"README.md", *(f"docs/n{i}.md" for i in range(4))}
    assert sync.removed_shas == []  # what earlier runs read behind it is kept


def test_a_commit_with_an_unreadable_date_is_one_failure(history):
    repo, shas = history
    path = repo.path / ".git" / "objects" / shas[1][:2] / shas[1][2:]
    raw = zlib.decompress(path.read_bytes()).split(b"\0", 1)[1]
    body = raw.replace(b"> ", b"> 99999999999999999999 ", 1)
    _corrupt(repo, shas[1], zlib.compress(b"commit %d\0" % len(body) + body))
    sync = repo.sync()
    assert [f["path"] for f in sync.failures] == [f"commits/{shas[1]}"]
    assert len(sync.new_commits) == 3
