"""Property-based: whatever JSON an export holds, whatever bytes and names a vault holds,
every item is read or reported, never raised, and what is read fits the tables."""

import json
import os
import tempfile
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jarvis_core.sources import registry
from jarvis_core.sources.tickets.export import read_ticket_set
from jarvis_core.sources.vault.ingest import StoredNotes, plan_ingest, write_plan
from jarvis_core.sources.vault.scan import scan_vault
from jarvis_core.stores import tables

# strategies this size have a long repr, which Hypothesis warns about
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
FUZZ = settings(max_examples=150, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# JSON values, with the keys the readers look for, so shapes come close to real issues.
KEYS = ["key", "fields", "summary", "description", "labels", "components", "fixVersions",
        "issuelinks", "type", "name", "inward", "outward", "inwardIssue", "outwardIssue",
        "comment", "comments", "body", "author", "created", "updated", "status", "parent",
        "assignee", "reporter", "content", "attrs", "level", "text", "number", "title",
        "user", "login", "assignees", "milestone", "pull_request", "merged_at", "state",
        "html_url", "issue_url", "repository_url", "issues", "self", "resolutiondate"]
SCALARS = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=False, allow_infinity=False)
           | st.sampled_from(["LUM-4", "2026-10-01T10:00:00.000+0000", "heading", "paragraph",
                              "https://github.com/acme/lumen/issues/7", "", "high", "Blocks"])
           | st.text(max_size=30))
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner,
                                      max_size=6), max_leaves=40)
# Mostly valid keys, summaries and numbers, so the readers get past them to the fields,
# whose values are mostly of the wrong kind (a number for a list, a string for an object).
VALUE = (st.integers(-2**70, 2**70) | st.text(max_size=6) | st.lists(SCALARS, max_size=3)
         | st.dictionaries(st.sampled_from(KEYS), SCALARS, max_size=3) | JSON)
FIELDS = st.tuples(st.sampled_from(["Summary", "x"]),
                   st.dictionaries(st.sampled_from(KEYS[3:24]), VALUE, min_size=2, max_size=8)
                   ).map(lambda pair: {**pair[1], "summary": pair[0]})
JIRA_ISSUE = st.fixed_dictionaries({"key": st.sampled_from(["LUM-1", "LUM-2", "LUM-3"]),
                                    "fields": FIELDS})
GITHUB_ISSUE = st.tuples(
    st.integers(1, 2**70), st.dictionaries(st.sampled_from(
        ["body", "labels", "assignees", "assignee", "user", "comments", "milestone",
         "pull_request", "state", "html_url", "created_at", "closed_at"]), VALUE,
        min_size=2, max_size=8)).map(lambda pair: {**pair[1], "number": pair[0],
                                                   "title": "Title"})
DOCUMENTS = (st.fixed_dictionaries({"issues": st.lists(JIRA_ISSUE, min_size=1, max_size=4)})
             | st.lists(GITHUB_ISSUE, min_size=1, max_size=4) | JIRA_ISSUE | JSON
             | st.lists(JIRA_ISSUE | GITHUB_ISSUE | JSON, max_size=4))


def _issue_count(document: object) -> int:
    if isinstance(document, dict) and isinstance(document.get("issues"), list):
        return len(document["issues"])
    return len(document) if isinstance(document, list) else 1


@FUZZ
@given(documents=st.lists(DOCUMENTS, min_size=1, max_size=3))
def test_any_json_shape_is_read_or_reported_never_raised(documents):
    with tempfile.TemporaryDirectory() as folder:
        for index, document in enumerate(documents):
            Path(folder, f"export-{index}.json").write_text(json.dumps(document))
        result = read_ticket_set(Path(folder), "fuzz", repo="lumen")
    assert result.tickets or result.failures or all(
        _issue_count(d) == 0 or isinstance(d, list) for d in documents)
    now = datetime(2026, 10, 1)
    frame = registry.table("tickets").frame([{**t, "ingested_at": now, "file_hash": "h"}
                                     for t in result.tickets.values()])
    assert frame.height == len(result.tickets)
    for _, reason in result.failures:
        assert isinstance(reason, str) and reason


NAMES = st.binary(min_size=1, max_size=40).map(
    lambda raw: raw.replace(b"/", b"_").replace(b"\0", b"_")).filter(
    lambda raw: raw not in (b".", b".."))
CONTENTS = st.binary(max_size=600) | st.text(max_size=600).map(str.encode)


@pytest.fixture(scope="module")
def conn():
    with duckdb.connect() as connection:
        tables.ensure_schema(connection, registry.declared_tables())
        yield connection


@FUZZ
@given(files=st.dictionaries(NAMES, CONTENTS, min_size=1, max_size=6))
def test_any_bytes_and_names_in_a_vault_are_read_or_reported(conn, files):
    with tempfile.TemporaryDirectory() as folder:
        for raw_name, content in files.items():
            Path(os.fsdecode(os.path.join(os.fsencode(folder), raw_name + b".md"))
                 ).write_bytes(content)
        scan = scan_vault(Path(folder))
        plan = plan_ingest("fuzz", scan, StoredNotes.none(), max_note_bytes=1_000_000)
    for table in ("notes", "ingest_failures", "attachments"):  # the example before's rows
        conn.execute(f"DELETE FROM {table}")
    notes, _ = write_plan(conn, plan)
    failed = conn.execute("SELECT count(*) FROM ingest_failures").fetchone()[0]
    visible = sum(1 for name in files if not name.startswith(b"."))
    assert notes + failed == visible
