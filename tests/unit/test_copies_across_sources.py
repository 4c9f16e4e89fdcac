"""One item in several sources (the sample's Jira and GitHub exports each configured twice, a
commit in two repository sources): one node per source, references resolve to every copy,
SAME_AS links the copies, and a name two different items share stays ambiguous."""

import json
import sqlite3
from contextlib import nullcontext
from pathlib import Path

import duckdb
import pytest

from jarvis_core.graph.cross_source import link_sources, resolve_references, same_item_edges
from jarvis_core.sources.references import COMMIT, GITHUB, JIRA, ReferenceIndex
from jarvis_core.sources.tickets.export import read_ticket_set
from jarvis_core.sources.tickets.graph import extract_ticket_graph
from jarvis_core.stores import tables
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from tests.graph_helpers import write_rows

SAMPLE_TICKETS = Path(__file__).resolve().parents[2] / "sample_data" / "tickets"
SHA = "3f2a9c1d" + "0" * 32
NOTE = "note:notes/Dedupe.md"


def node_rows(source: str, folder: str, repo: str | None = None) -> list[dict]:
    """The ticket nodes of one configured copy of a sample export, as graph_nodes rows."""
    tickets = list(read_ticket_set(SAMPLE_TICKETS / folder, source, repo=repo).tickets.values())
    return [{"node_key": n.key, "type": n.type, "title": n.title, "node_source": n.source,
             "properties": json.dumps(n.properties, default=str)}
            for n in extract_ticket_graph(source, tickets, []).nodes if n.type == "ticket"]


@pytest.fixture(scope="module")
def nodes() -> list[dict]:
    commits = [{"node_key": f"commit:{source}/{SHA}", "type": "commit", "title": "Dedupe",
                "node_source": source, "properties": json.dumps({"sha": SHA})}
               for source in ("lumen", "lumen-mirror")]
    other_lumen = {"node_key": "ticket:fork/lumen#7", "type": "ticket", "title": "lumen#7: x",
                   "node_source": "fork", "properties": json.dumps(
                       {"system": "github", "key": "lumen#7", "repo": "lumen",
                        "repo_full": "someone/lumen", "number": 7})}
    return [*node_rows("lumen-jira", "jira"), *node_rows("jira-again", "jira"),
            *node_rows("lumen-github", "github", repo="lumen"),
            *node_rows("github-again", "github"), *commits, other_lumen]


def reference(kind: str, target: str) -> dict:
    return {"source": "notes", "origin": NOTE, "src": NOTE, "relation": "MENTIONS",
            "kind": kind, "target": target, "written": target, "line": 3,
            "evidence": ["c1"], "evidence_text": f"cites {target}", "inverse": False}


def test_each_source_has_its_own_node_of_a_ticket(nodes):
    keys = [row["node_key"] for row in nodes]
    assert len(keys) == len(set(keys))
    assert {"ticket:lumen-jira/LUM-4", "ticket:jira-again/LUM-4", "ticket:lumen-github/lumen#7",
            "ticket:github-again/example/lumen#7"} <= set(keys)


def test_a_reference_resolves_to_every_copy_of_its_item(nodes):
    index = ReferenceIndex([*nodes, {"node_key": NOTE, "type": "note", "properties": {}}])
    assert index.resolve(JIRA, "LUM-4") == (
        ("ticket:jira-again/LUM-4", "ticket:lumen-jira/LUM-4"), "resolved")
    assert index.resolve(GITHUB, "example/lumen#7") == (
        ("ticket:github-again/example/lumen#7", "ticket:lumen-github/lumen#7"), "resolved")
    assert index.resolve(COMMIT, SHA[:7])[1] == "resolved"
    # 'lumen#7' also names the issue of another repository called lumen: two items
    assert index.resolve(GITHUB, "lumen#7")[1] == "ambiguous"
    edges, unresolved = resolve_references(
        [reference(JIRA, "LUM-4"), reference(COMMIT, SHA[:8]), reference(GITHUB, "lumen#7")],
        index)
    assert {(e.relation, e.dst) for e in edges} == {
        ("MENTIONS", "ticket:lumen-jira/LUM-4"), ("MENTIONS", "ticket:jira-again/LUM-4"),
        ("MENTIONS", f"commit:lumen/{SHA}"), ("MENTIONS", f"commit:lumen-mirror/{SHA}")}
    assert [(row["target"], row["reason"]) for row in unresolved] == [("lumen#7", "ambiguous")]


def test_copies_of_one_item_are_same_as_each_other(nodes):
    edges = same_item_edges(ReferenceIndex(nodes), nodes)
    tickets = [row for row in nodes if row["type"] == "ticket" and row["node_source"] != "fork"]
    assert len(edges) == len(tickets) // 2 + 1   # one per ticket copy, one for the commit
    same = {(e.src, e.dst, e.source) for e in edges}
    assert ("ticket:lumen-jira/LUM-4", "ticket:jira-again/LUM-4", "lumen-jira") in same
    assert ("ticket:lumen-github/lumen#16", "ticket:github-again/example/lumen#16",
            "lumen-github") in same
    assert (f"commit:lumen/{SHA}", f"commit:lumen-mirror/{SHA}", "lumen") in same
    assert not any("fork" in e.src + e.dst for e in edges)
    assert all(e.relation == "SAME_AS" and e.origin == f"xref:{e.src}" and e.evidence_text
               for e in edges)


def test_a_ticket_node_stored_before_keys_carried_their_source_still_resolves():
    """Until its ticket set runs again after the upgrade, a node is 'ticket:<KEY>' without a
    'key' property; cross-source resolution must not fail on it."""
    index = ReferenceIndex([{"node_key": "ticket:LUM-4", "type": "ticket",
                             "properties": {"system": "jira"}}])
    assert index.resolve(JIRA, "LUM-4") == (("ticket:LUM-4",), "resolved")
    assert index.resolve(JIRA, "LUM-5") == ((), "unresolved")


def test_references_linked_a_citing_document_at_a_time_link_as_all_at_once(nodes, tmp_path):
    """Two notes and a ticket copy cite tickets and a commit (the copy is also the origin
    of a SAME_AS edge), then one note stops citing: one citing document at a time writes
    the edges, mentions and unresolved references all of them at once write."""
    other = "note:notes/Other.md"
    citing = [{"node_key": key, "type": "note", "title": key, "node_source": "notes",
               "properties": "{}"} for key in (NOTE, other)]
    copy = "ticket:lumen-jira/LUM-4"  # SAME_AS the jira-again copy, its edge's origin
    references = [reference(JIRA, "LUM-4"), reference(GITHUB, "lumen#7"),
                  {**reference(COMMIT, SHA[:8]), "origin": other, "src": other},
                  {**reference(COMMIT, SHA[:7]), "origin": copy, "src": copy,
                   "source": "lumen-jira"}]
    runs = {}
    for origins in (1, 100):
        with duckdb.connect() as conn, SqliteGraphStore(tmp_path / f"{origins}.sqlite") as store:
            tables.ensure_schema(conn, tables.SHARED_TABLES)
            found = []
            for cited in (references, references[2:]):
                write_rows(conn, "notes", {"graph_nodes": [{**row, "source": row["node_source"]}
                                                           for row in [*nodes, *citing]]})
                conn.execute("DELETE FROM graph_references")
                write_rows(conn, "notes", {"graph_references": cited})
                run = link_sources(lambda: nullcontext(conn), store, origins=origins,
                                   batch_rows=2)
                assert run.dangling == 0 and run.references == len(cited)
                found.append({table: sorted(conn.execute(f"SELECT {columns} FROM {table}")
                                            .fetchall()) for table, columns in (
                    ("graph_edges", "origin, src, relation, dst, evidence, evidence_text"),
                    ("chunk_mentions", "*"), ("unresolved_references", "*"))})
                found[-1]["store"] = sorted(sqlite3.connect(store.path).execute(
                    "SELECT * FROM edges").fetchall())
            runs[origins] = found
    assert runs[1] == runs[100]
    (first, after), sames = runs[1], [e for e in runs[1][0]["store"] if e[3] == "SAME_AS"]
    assert {("xref:" + copy, copy, "MENTIONS"), ("xref:" + copy, copy, "SAME_AS")} <= {
        row[:3] for row in first["graph_edges"]}
    assert sames
    assert not any(NOTE in str(row) for row in after["graph_edges"] + after["store"])
    assert len(first["unresolved_references"]) == 1 and not after["unresolved_references"]
