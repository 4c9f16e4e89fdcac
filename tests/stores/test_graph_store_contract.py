"""One contract for every graph store backend: SQLite always, a Neo4j server when NEO4J_URI
names one (NEO4J_USER defaults to "neo4j", NEO4J_PASSWORD). Small hand-built graphs with the
exact nodes expected at each depth. Every key and source a test writes carries a prefix of
its own, and on Neo4j the test's nodes are deleted afterwards, so tests can share a database.
The published-copy tests are SQLite's (Neo4j serves readers itself); they read from threads
and from second processes while the writer keeps writing, as the query side does."""

import json
import os
import random
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path

import pytest

from jarvis_bench.synthetic_graph import bench_neighbourhood, synthetic_graph
from jarvis_core.stores.graph import cached as cached_module
from jarvis_core.stores.graph.base import (
    GraphNodeNotFound,
    GraphStore,
    GraphStoreReadOnly,
    NodeView,
    Subgraph,
)
from jarvis_core.stores.graph.cached import CachedGraphStore
from jarvis_core.stores.graph.elements import EXPLICIT, INFERRED, Edge, Node
from jarvis_core.stores.graph.neo4j import Neo4jGraphStore, node_label, relationship_type
from jarvis_core.stores.graph.search import graph_search
from jarvis_core.stores.graph.sqlite import SqliteGraphStore


@pytest.fixture(params=["sqlite", "neo4j"])
def backend(request) -> str:
    if request.param == "neo4j" and not os.environ.get("NEO4J_URI"):
        pytest.skip("NEO4J_URI not set: no Neo4j server to test against")
    return request.param


class Graph:
    """Builds a test's nodes and edges under its own key prefix and reads answers back
    without it; counts are relative to what the store held when the test began."""

    def __init__(self, store: GraphStore, prefix: str):
        self.store = store
        self.prefix = prefix
        self.baseline = store.counts()

    def key(self, name: str) -> str:
        return self.prefix + name

    def name(self, key: str) -> str:
        return key.removeprefix(self.prefix)

    def source(self, name: str = "vault") -> str:
        return self.prefix + name

    def note(self, name: str, source: str = "vault", **properties) -> Node:
        return Node(self.key(f"note:{name}"), "note", name.upper(), self.source(source),
                    properties)

    def tag(self, name: str) -> Node:
        return Node(self.key(f"tag:{name}"), "tag", name, None)

    def url(self, name: str) -> Node:
        return Node(self.key(f"link:{name}"), "link", f"https://{name}", None)

    def edge(self, src: str, dst: str, relation: str = "LINKS_TO", *, origin: str | None = None,
             extractor: str = "wikilink", evidence: tuple[str, ...] = ("c1",)) -> Edge:
        """``src``/``dst``/``origin`` are short keys such as "note:a" or "tag:x"."""
        return Edge(self.key(src), self.key(dst), relation, EXPLICIT, extractor,
                    self.key(origin or src), self.source(), evidence, f"{src} -> {dst}")

    def tagged(self, note: str, tag: str, **kwargs) -> Edge:
        return self.edge(note, tag, "TAGGED", extractor="tag", **kwargs)

    def around(self, center: str, depth: int, **kwargs) -> dict[str, int]:
        """The neighbourhood as {short key: distance}."""
        subgraph = self.store.neighbourhood(self.key(center), depth, **kwargs)
        return {self.name(n.key): n.distance for n in subgraph.nodes}

    def edge_names(self, subgraph: Subgraph) -> list[tuple[str, str, str]]:
        return [(self.name(e.src), e.relation, self.name(e.dst)) for e in subgraph.edges]

    def counts(self) -> dict:
        now = self.store.counts()
        return {part: {name: count - self.baseline[part].get(name, 0)
                       for name, count in now[part].items()
                       if count != self.baseline[part].get(name, 0)}
                for part in ("nodes", "edges")}


@pytest.fixture
def graph(backend, tmp_path):
    prefix = f"t{uuid.uuid4().hex[:10]}/"
    if backend == "sqlite":
        store = SqliteGraphStore(tmp_path / "graph.sqlite")
    else:
        store = Neo4jGraphStore(os.environ["NEO4J_URI"], os.environ.get("NEO4J_USER", "neo4j"),
                                os.environ.get("NEO4J_PASSWORD", ""))
    try:
        yield Graph(store, prefix)
    finally:
        store.close()
        if backend == "neo4j":
            import neo4j

            with neo4j.GraphDatabase.driver(
                    os.environ["NEO4J_URI"],
                    auth=(os.environ.get("NEO4J_USER", "neo4j"),
                          os.environ.get("NEO4J_PASSWORD", ""))) as driver:
                driver.execute_query("MATCH (n:Node) WHERE n.key STARTS WITH $prefix "
                                     "DETACH DELETE n", {"prefix": prefix})


# -- small graphs ----------------------------------------------------------------------------

def chain(g: Graph) -> None:
    """a -> b -> c -> d -> e"""
    names = "abcde"
    g.store.apply([], [g.note(n) for n in names],
                  [g.edge(f"note:{x}", f"note:{y}") for x, y in zip(names, names[1:])])


def star(g: Graph) -> None:
    """hub links to s1..s4; hub is tagged y; s1 and s2 are tagged x; s3 links to a URL."""
    leaves = ["s1", "s2", "s3", "s4"]
    g.store.apply(
        [],
        [g.note("hub"), *(g.note(s) for s in leaves), g.tag("x"), g.tag("y"), g.url("u")],
        [*(g.edge("note:hub", f"note:{s}") for s in leaves),
         g.tagged("note:hub", "tag:y"), g.tagged("note:s1", "tag:x"),
         g.tagged("note:s2", "tag:x"), g.edge("note:s3", "link:u", extractor="bare_url")])


def cycle(g: Graph) -> None:
    """a -> b -> c -> d -> a"""
    names = "abcd"
    g.store.apply([], [g.note(n) for n in names],
                  [g.edge(f"note:{x}", f"note:{y}") for x, y in zip(names, names[1:] + "a")])


# -- neighbourhoods ---------------------------------------------------------------------------

def test_chain_neighbourhood_at_each_depth(graph):
    chain(graph)
    assert graph.around("note:a", 1) == {"note:a": 0, "note:b": 1}
    assert graph.around("note:a", 2) == {"note:a": 0, "note:b": 1, "note:c": 2}
    assert graph.around("note:a", 3) == {"note:a": 0, "note:b": 1, "note:c": 2, "note:d": 3}
    assert graph.around("note:c", 1) == {"note:c": 0, "note:b": 1, "note:d": 1}, \
        "hops follow edges in both directions"
    assert graph.around("note:c", 3) == {"note:c": 0, "note:b": 1, "note:d": 1, "note:a": 2,
                                         "note:e": 2}


def test_star_neighbourhood_reaches_tags_and_urls(graph):
    star(graph)
    assert graph.around("note:hub", 1) == {
        "note:hub": 0, "note:s1": 1, "note:s2": 1, "note:s3": 1, "note:s4": 1, "tag:y": 1}
    assert graph.around("note:hub", 2) == {
        "note:hub": 0, "note:s1": 1, "note:s2": 1, "note:s3": 1, "note:s4": 1, "tag:y": 1,
        "link:u": 2, "tag:x": 2}
    assert graph.around("note:s1", 2) == {
        "note:s1": 0, "note:hub": 1, "tag:x": 1,
        "note:s2": 2, "note:s3": 2, "note:s4": 2, "tag:y": 2}
    assert graph.around("tag:x", 1) == {"tag:x": 0, "note:s1": 1, "note:s2": 1}


def test_cycle_neighbourhood_counts_the_shortest_distance(graph):
    cycle(graph)
    assert graph.around("note:a", 1) == {"note:a": 0, "note:b": 1, "note:d": 1}
    assert graph.around("note:a", 2) == {"note:a": 0, "note:b": 1, "note:d": 1, "note:c": 2}
    assert graph.around("note:a", 3) == graph.around("note:a", 2)


def test_neighbourhood_edges_are_those_among_its_nodes_with_their_evidence(graph):
    star(graph)
    subgraph = graph.store.neighbourhood(graph.key("note:s1"), 1)
    assert graph.edge_names(subgraph) == [("note:hub", "LINKS_TO", "note:s1"),
                                          ("note:s1", "TAGGED", "tag:x")]
    tagged = subgraph.edges[1]
    assert (tagged.confidence, tagged.extractor, tagged.origin, tagged.evidence,
            tagged.evidence_text, tagged.weight) == (
        EXPLICIT, "tag", graph.key("note:s1"), ("c1",), "note:s1 -> tag:x", 1.0)
    assert tagged.source == graph.source()
    assert subgraph.center == graph.key("note:s1") and subgraph.depth == 1
    assert not subgraph.truncated


def test_order_is_deterministic_whatever_the_insertion_order(graph):
    g = graph
    nodes = [g.note(n) for n in "pqrst"] + [g.tag("b"), g.tag("a"), g.url("z")]
    edges = [g.edge("note:p", f"note:{n}") for n in "qrst"]
    edges += [g.edge("note:p", "note:q", "EMBEDS", extractor="embed"),
              g.edge("note:q", "note:p", origin="note:q"),
              g.edge("note:p", "note:q", origin="note:r", extractor="frontmatter"),
              g.tagged("note:p", "tag:b"), g.tagged("note:q", "tag:a"),
              g.edge("note:r", "link:z", extractor="bare_url")]
    random.Random(7).shuffle(nodes)
    random.Random(7).shuffle(edges)
    g.store.apply([], nodes, edges)
    first = g.store.neighbourhood(g.key("note:p"), 2)
    assert [(g.name(n.key), n.distance) for n in first.nodes] == [
        ("note:p", 0), ("note:q", 1), ("note:r", 1), ("note:s", 1), ("note:t", 1),
        ("tag:b", 1), ("link:z", 2), ("tag:a", 2)]
    assert [(*names, g.name(e.origin)) for names, e in zip(g.edge_names(first), first.edges)] == [
        ("note:p", "EMBEDS", "note:q", "note:p"),
        ("note:p", "LINKS_TO", "note:q", "note:p"),
        ("note:p", "LINKS_TO", "note:q", "note:r"),
        ("note:p", "LINKS_TO", "note:r", "note:p"),
        ("note:p", "LINKS_TO", "note:s", "note:p"),
        ("note:p", "LINKS_TO", "note:t", "note:p"),
        ("note:p", "TAGGED", "tag:b", "note:p"),
        ("note:q", "LINKS_TO", "note:p", "note:q"),
        ("note:q", "TAGGED", "tag:a", "note:q"),
        ("note:r", "LINKS_TO", "link:z", "note:r")]
    assert all(g.store.neighbourhood(g.key("note:p"), 2) == first for _ in range(3))


def test_limit_keeps_the_nearest_nodes_and_says_it_truncated(graph):
    g = graph
    star(g)
    g.store.apply([], [g.note("hub"), Node(g.key("a-tag-keyed-first"), "tag", "a", None)],
                  [g.tagged("note:hub", "a-tag-keyed-first")])
    subgraph = g.store.neighbourhood(g.key("note:hub"), 2, limit=4)
    assert [g.name(n.key) for n in subgraph.nodes] == ["note:hub", "note:s1", "note:s2",
                                                       "note:s3"], "by type before key"
    assert subgraph.truncated
    assert g.edge_names(subgraph) == [("note:hub", "LINKS_TO", f"note:s{i}") for i in (1, 2, 3)]
    cut_in_tags = g.store.neighbourhood(g.key("note:hub"), 3, limit=6)
    assert [g.name(n.key) for n in cut_in_tags.nodes][4:] == ["note:s4", "a-tag-keyed-first"]
    exact = g.store.neighbourhood(g.key("note:hub"), 1, limit=7)
    assert len(exact.nodes) == 7 and not exact.truncated


def test_depth_outside_one_to_three_and_an_absent_centre_are_rejected(graph):
    chain(graph)
    for depth in (0, 4, -1, True, 2.0):
        with pytest.raises(ValueError, match="depth must be 1..3"):
            graph.store.neighbourhood(graph.key("note:a"), depth)
    with pytest.raises(GraphNodeNotFound):
        graph.store.neighbourhood(graph.key("note:nowhere"), 1)
    with pytest.raises(ValueError, match="limit"):
        graph.store.neighbourhood(graph.key("note:a"), 1, limit=0)


# -- apply -------------------------------------------------------------------------------------

def test_reapplying_the_same_batch_leaves_one_copy(graph):
    star(graph)
    before = (graph.counts(), graph.store.neighbourhood(graph.key("note:hub"), 2))
    star(graph)
    assert (graph.counts(), graph.store.neighbourhood(graph.key("note:hub"), 2)) == before
    assert graph.counts() == {"nodes": {"note": 5, "tag": 2, "link": 1},
                              "edges": {"LINKS_TO": 5, "TAGGED": 3}}


def test_rewriting_one_origin_leaves_the_other_origins_edges_intact(graph):
    g = graph
    g.store.apply([], [g.note(n) for n in "abcd"] + [g.tag("t")],
                  [g.edge("note:a", "note:b"), g.edge("note:a", "note:c"),
                   g.tagged("note:a", "tag:t"), g.edge("note:d", "note:b"),
                   g.edge("note:a", "note:d", origin="note:d", extractor="frontmatter")])
    g.store.apply([g.key("note:a")], [g.note("a", status="edited"), g.note("c")],
                  [g.edge("note:a", "note:c", evidence=("c2",))])
    assert g.around("note:b", 1) == {"note:b": 0, "note:d": 1}
    assert g.around("note:a", 1) == {"note:a": 0, "note:c": 1, "note:d": 1}, \
        "the a -> d edge comes from d's content and stays"
    [rewritten] = g.store.neighbourhood(g.key("note:c"), 1).edges
    assert rewritten.evidence == ("c2",)
    assert g.store.node(g.key("note:a")).properties == {"status": "edited"}
    assert g.counts() == {"nodes": {"note": 4}, "edges": {"LINKS_TO": 3}}, \
        "tag t lost its only edge and was collected"


def test_removing_a_note_removes_its_edges_and_the_tags_only_it_used(graph):
    g = graph
    g.store.apply([], [g.note("old"), g.note("other"), g.tag("only"), g.tag("shared"),
                       g.url("private")],
                  [g.tagged("note:old", "tag:only"), g.tagged("note:old", "tag:shared"),
                   g.tagged("note:other", "tag:shared"), g.edge("note:old", "link:private"),
                   g.edge("note:other", "note:old")])
    g.store.apply([g.key("note:old")], [], [], removed_documents=[g.key("note:old")])
    assert g.store.node(g.key("note:old")) is None
    assert g.store.node(g.key("tag:only")) is None
    assert g.store.node(g.key("link:private")) is None
    assert g.around("note:other", 1) == {"note:other": 0, "tag:shared": 1}, \
        "the other note's link to the removed note went with it"
    assert g.counts() == {"nodes": {"note": 1, "tag": 1}, "edges": {"TAGGED": 1}}
    assert g.store.dangling_edges() == 0


def test_commits_repo_docs_and_tickets_are_documents_like_notes(graph):
    """Documents of every source kind outlive their edges; persons and files do not."""
    g = graph
    commit = Node(g.key("commit:repo/abc"), "commit", "Fix", g.source("repo"), {"sha": "abc"})
    ticket = Node(g.key("ticket:LUM-4"), "ticket", "LUM-4", g.source("jira"))
    doc = Node(g.key("repo_doc:repo/README.md"), "repo_doc", "Readme", g.source("repo"))
    person = Node(g.key("person:dana@x"), "person", "Dana", None)
    file = Node(g.key("file:repo/a.py"), "file", "a.py", g.source("repo"))
    g.store.apply([], [commit, ticket, doc, person, file],
                  [g.edge("person:dana@x", "commit:repo/abc", "AUTHORED",
                          origin="commit:repo/abc"),
                   g.edge("commit:repo/abc", "file:repo/a.py", "MODIFIES"),
                   g.edge("commit:repo/abc", "ticket:LUM-4", "MENTIONS")])
    assert g.store.document_keys(g.source("repo")) == {commit.key, doc.key}
    g.store.apply([commit.key], [], [])  # the commit's subgraph is rewritten as nothing
    assert g.store.node(commit.key) is not None and g.store.node(ticket.key) is not None
    assert g.store.node(person.key) is None and g.store.node(file.key) is None
    g.store.apply([], [], [], removed_documents=[commit.key, ticket.key, doc.key])
    assert g.store.document_keys(g.source("repo")) == set()
    assert g.store.document_keys(g.source("jira")) == set()


def test_a_rename_is_a_removal_plus_a_new_note(graph):
    g = graph
    g.store.apply([], [g.note("before"), g.note("friend"), g.tag("t")],
                  [g.tagged("note:before", "tag:t"), g.edge("note:before", "note:friend")])
    g.store.apply([g.key("note:before")], [g.note("after"), g.note("friend"), g.tag("t")],
                  [g.tagged("note:after", "tag:t"), g.edge("note:after", "note:friend")],
                  removed_documents=[g.key("note:before")])
    assert g.around("tag:t", 2) == {"tag:t": 0, "note:after": 1, "note:friend": 2}
    assert g.store.document_keys(g.source()) == {g.key("note:after"), g.key("note:friend")}
    assert g.counts() == {"nodes": {"note": 2, "tag": 1}, "edges": {"LINKS_TO": 1, "TAGGED": 1}}


def test_a_tag_shared_by_two_origins_survives_until_neither_uses_it(graph):
    g = graph
    g.store.apply([], [g.note("a"), g.note("b"), g.tag("t")],
                  [g.tagged("note:a", "tag:t"), g.tagged("note:b", "tag:t")])
    g.store.apply([g.key("note:a")], [g.note("a")], [])
    assert g.around("tag:t", 1) == {"tag:t": 0, "note:b": 1}
    g.store.apply([g.key("note:b")], [g.note("b")], [])
    assert g.store.node(g.key("tag:t")) is None
    assert g.store.document_keys(g.source()) == {g.key("note:a"), g.key("note:b")}, \
        "notes are never garbage"


def test_a_dangling_edge_is_rejected_and_nothing_is_written(graph):
    g = graph
    chain(g)
    before = g.counts()
    missing = g.edge("note:a", "note:ghost")
    with pytest.raises(ValueError, match="note:ghost") as raised:
        g.store.apply([g.key("note:a")], [g.note("a", changed=True), g.note("new")], [missing])
    assert missing.key in str(raised.value)
    assert g.counts() == before
    assert g.store.node(g.key("note:new")) is None
    assert g.store.node(g.key("note:a")).properties == {}
    with pytest.raises(ValueError, match="note:a"):
        g.store.apply([], [g.note("z")], [g.edge("note:z", "note:a")],
                      removed_documents=[g.key("note:a")])
    assert g.counts() == before


def test_an_edge_may_point_at_a_node_stored_earlier(graph):
    g = graph
    chain(g)
    g.store.apply([], [g.note("f")], [g.edge("note:f", "note:e")])
    assert g.around("note:f", 1) == {"note:f": 0, "note:e": 1}


def test_nodes_are_upserted_with_their_properties(graph):
    g = graph
    props = {"aliases": ["One", "Uno"], "status": "draft", "rating": 4, "score": 0.5,
             "done": False, "meta": {"nested": [1, {"deep": None}]}, "unicode": "é✓"}
    g.store.apply([], [g.note("one", **props), g.note("two")], [g.edge("note:two", "note:one")])
    node = g.store.node(g.key("note:one"))
    assert (node.type, node.title, node.source, node.properties, node.distance) == (
        "note", "ONE", g.source(), props, None)
    g.store.apply([], [g.note("one", status="final")], [])
    assert g.store.node(g.key("note:one")).properties == {"status": "final"}
    g.store.apply([], [Node(g.key("note:one"), "file", "one.py", None)], [])
    assert g.store.node(g.key("note:one")) == NodeView(g.key("note:one"), "file", "one.py", None)
    assert g.around("note:two", 1) == {"note:two": 0, "note:one": 1}
    assert g.store.node(g.key("note:nowhere")) is None
    g.store.apply([], [g.tag("lonely")], [])
    assert g.store.node(g.key("tag:lonely")) is None, "a tag no edge touches is garbage at once"


def test_invalid_nodes_are_rejected(graph):
    g = graph
    with pytest.raises(ValueError, match="lower snake case"):
        g.store.apply([], [Node(g.key("x"), "Bad Type", "x", None)], [])
    with pytest.raises(ValueError, match="not JSON"):
        g.store.apply([], [Node(g.key("x"), "note", "x", None, {"when": {1, 2}})], [])
    with pytest.raises(ValueError, match="not JSON"):
        g.store.apply([], [Node(g.key("x"), "note", "x", None, {"nan": float("nan")})], [])
    with pytest.raises(TypeError, match="collections of keys"):
        g.store.apply(g.key("note:x"), [], [])


def test_counts_note_keys_and_dangling_edges(graph):
    g = graph
    star(g)
    g.store.apply([], [g.note("elsewhere", source="other")], [])
    g.store.apply([], [g.note("s4")], [g.edge("note:s4", "note:hub", "SIMILAR_TO",
                                              extractor="embedding")])
    assert g.counts() == {"nodes": {"note": 6, "tag": 2, "link": 1},
                          "edges": {"LINKS_TO": 5, "SIMILAR_TO": 1, "TAGGED": 3}}
    assert g.store.document_keys(g.source()) == {g.key(f"note:{n}")
                                             for n in ("hub", "s1", "s2", "s3", "s4")}
    assert g.store.document_keys(g.source("other")) == {g.key("note:elsewhere")}
    assert g.store.document_keys(g.source("nowhere")) == set()
    assert {g.key("note:hub"), g.key("note:elsewhere")} <= g.store.document_keys()
    assert g.store.dangling_edges() == 0


def test_targets_are_followed_outside_any_neighbourhood(graph):
    g = graph
    star(g)
    found = g.store.targets([g.key("note:s1"), g.key("note:s2"), g.key("note:s3")], "TAGGED")
    assert {g.name(k): [g.name(n.key) for n in nodes] for k, nodes in found.items()} == {
        "note:s1": ["tag:x"], "note:s2": ["tag:x"]}
    assert g.store.targets([], "TAGGED") == {}


# -- graph search ----------------------------------------------------------------------------

def test_graph_search_shape_and_grouping(graph):
    g = graph
    star(g)
    g.store.apply([], [g.note("s2"), g.note("hub")],
                  [Edge(g.key("note:s2"), g.key("note:hub"), "SIMILAR_TO", INFERRED,
                        "embedding", g.key("note:s2"), g.source(), (), "", 0.8)])
    result = graph_search(g.store, g.key("note:s1"), depth=1)
    assert result["center"] == {"key": g.key("note:s1"), "type": "note", "title": "S1",
                                "source": g.source(), "properties": {}, "distance": 0,
                                "tags": ["x"]}
    assert [(g.name(n["key"]), n["distance"], n["tags"]) for n in result["notes"]] == [
        ("note:hub", 1, ["y"])], "tags come from TAGGED edges, even ones outside the result"
    assert list(result["relationships"]) == ["LINKS_TO", "TAGGED"]
    assert result["relationships"]["LINKS_TO"] == [{
        "src": g.key("note:hub"), "dst": g.key("note:s1"), "src_title": "HUB",
        "dst_title": "S1", "evidence": ["c1"], "evidence_text": "note:hub -> note:s1",
        "extractor": "wikilink", "confidence": EXPLICIT}]
    assert result["counts"] == {"notes": 1, "tags": 1, "links": 0, "relationships": 2,
                                "by_relation": {"LINKS_TO": 1, "TAGGED": 1}}
    assert result["truncated"] is False

    wider = graph_search(g.store, g.key("note:hub"), depth=2)
    assert [(g.name(n["key"]), n["distance"]) for n in wider["notes"]] == [
        ("note:s1", 1), ("note:s2", 1), ("note:s3", 1), ("note:s4", 1)]
    assert list(wider["relationships"]) == ["LINKS_TO", "SIMILAR_TO", "TAGGED"]
    assert [(g.name(r["src"]), g.name(r["dst"])) for r in wider["relationships"]["TAGGED"]] == [
        ("note:hub", "tag:y"), ("note:s1", "tag:x"), ("note:s2", "tag:x")]
    assert wider["relationships"]["SIMILAR_TO"][0]["confidence"] == INFERRED
    assert wider["counts"] == {"notes": 4, "tags": 2, "links": 1, "relationships": 9,
                               "by_relation": {"LINKS_TO": 5, "SIMILAR_TO": 1, "TAGGED": 3}}

    with pytest.raises(GraphNodeNotFound) as missing:
        graph_search(g.store, g.key("note:nowhere"))
    assert isinstance(missing.value, KeyError)


def test_bench_neighbourhood_reports_latencies(graph):
    star(graph)
    report = bench_neighbourhood(graph.store, [graph.key("note:hub"), graph.key("note:s1")])
    assert report["queries"] == 2 and report["depth"] == 2
    assert 0 <= report["p50_ms"] <= report["p95_ms"] <= report["max_ms"]


def test_neo4j_names_are_safe_cypher_identifiers():
    """Relationship types and labels are written into Cypher text, so they must be inert."""
    assert relationship_type("LINKS_TO") == "LINKS_TO"
    assert relationship_type("links-to`) DETACH DELETE (n") == "LINKS_TO___DETACH_DELETE__N"
    assert relationship_type("2nd") == "R_2ND"
    assert (node_label("note"), node_label("ticket"), node_label("some_type")) == ("Note", "Ticket",
                                                                       "SomeType")


# -- SQLite: published copies ----------------------------------------------------------------

PROJECT_ROOT = Path(__file__).resolve().parents[2]
READER_PROCESS = """
import json, sys
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
with SqliteGraphStore.open_read_only(sys.argv[1]) as store:
    print(json.dumps([[n.key, n.distance] for n in store.neighbourhood("note:hub", 2).nodes]))
"""


@pytest.fixture
def sqlite_graph(tmp_path):
    store = SqliteGraphStore(tmp_path / "work" / "graph.sqlite")
    yield Graph(store, "")
    store.close()


def test_a_published_copy_answers_the_same_while_the_writer_keeps_writing(sqlite_graph,
                                                                          tmp_path):
    g = sqlite_graph
    star(g)
    published = tmp_path / "serving" / "graph.sqlite"
    published.parent.mkdir()
    g.store.publish_copy(published)
    assert [p.name for p in published.parent.iterdir()] == ["graph.sqlite"], \
        "one self-contained file: no -wal or -shm beside it"
    expected = {(c, d): g.store.neighbourhood(c, d) for c in ("note:hub", "tag:x", "link:u")
                for d in (1, 2, 3)}
    expected_counts = g.store.counts()
    with pytest.raises(FileExistsError):
        g.store.publish_copy(published)

    stop, written = threading.Event(), []

    def keep_writing() -> None:
        for n in range(200):
            if stop.is_set():
                return
            g.store.apply([f"note:s{n % 4 + 1}"], [g.note(f"s{n % 4 + 1}"), g.note(f"w{n}")],
                          [g.edge(f"note:s{n % 4 + 1}", f"note:w{n}")])
            written.append(n)

    readers = [SqliteGraphStore.open_read_only(published) for _ in range(2)]
    cached = CachedGraphStore(published)
    writer = threading.Thread(target=keep_writing)
    writer.start()
    processes = [subprocess.Popen([sys.executable, "-c", READER_PROCESS, str(published)],
                                  stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)
                 for _ in range(2)]
    rounds = 0
    try:
        while rounds < 20 or (len(written) < 10 and writer.is_alive()):
            rounds += 1
            for reader in (*readers, cached):
                for (center, depth), subgraph in expected.items():
                    assert reader.neighbourhood(center, depth) == subgraph
                assert reader.counts() == expected_counts
        outputs = [process.communicate(timeout=60)[0] for process in processes]
    finally:
        stop.set()
        writer.join()
    assert written, "the writer made progress meanwhile"
    assert [json.loads(output) for output in outputs] == [
        [[n.key, n.distance] for n in expected["note:hub", 2].nodes]] * 2
    assert g.store.neighbourhood("note:hub", 2) != expected["note:hub", 2]
    live = SqliteGraphStore.open_read_only(g.store.path, immutable=False)
    assert live.neighbourhood("note:hub", 2) == g.store.neighbourhood("note:hub", 2)
    for store in (*readers, cached, live):
        with pytest.raises(GraphStoreReadOnly):
            store.apply([], [g.note("nope")], [])
        store.close()
        store.close()


def test_the_cached_copy_matches_sqlite_on_a_generated_vault(tmp_path):
    nodes, edges = synthetic_graph(400, seed=3, links_per_note=4, tags=20)
    with SqliteGraphStore(tmp_path / "graph.sqlite") as store:
        store.apply([], nodes, edges)
        store.publish_copy(tmp_path / "published.sqlite")
        with CachedGraphStore(tmp_path / "published.sqlite") as cached:
            centers = random.Random(5).sample([n.key for n in nodes], 15)
            for center in centers:
                for depth in (1, 2, 3):
                    for limit in (7, 60, 500):
                        expected = store.neighbourhood(center, depth, limit=limit)
                        assert cached.neighbourhood(center, depth, limit=limit) == expected
            assert cached.counts() == store.counts()
            for relation in sorted({edge.relation for edge in edges}) + ["NO_SUCH_RELATION"]:
                sources = [n.key for n in nodes[::3]] + ["note:none"]
                assert cached.targets(sources, relation) == store.targets(sources, relation)
            report = bench_neighbourhood(cached, centers)
            assert report["p50_ms"] > 0 and report["queries"] == len(centers)
    kinds = Counter(n.type for n in nodes)
    assert kinds["note"] == 400 and kinds["tag"] == 20 and kinds["link"] > 0


def test_the_cached_copy_reads_an_edge_once_and_keeps_at_most_its_bound(tmp_path, monkeypatch):
    nodes, edges = synthetic_graph(400, seed=3, links_per_note=4, tags=20)
    read: list[int] = []
    by_rowid = SqliteGraphStore._edges_by_rowid
    with SqliteGraphStore(tmp_path / "graph.sqlite") as store:
        store.apply([], nodes, edges)
        store.publish_copy(tmp_path / "published.sqlite")
        centers = random.Random(5).sample([n.key for n in nodes], 15)
        expected = [store.neighbourhood(center, 2) for center in centers]
    monkeypatch.setattr(SqliteGraphStore, "_edges_by_rowid", staticmethod(
        lambda conn, rowids: by_rowid(conn, read.extend(rowids := list(rowids)) or rowids)))
    with CachedGraphStore(tmp_path / "published.sqlite") as cached:
        assert [cached.neighbourhood(center, 2) for center in centers] == expected
        assert len(read) == len(set(read)) and read
        first = len(read)
        assert [cached.neighbourhood(center, 2) for center in centers] == expected
        assert len(read) == first  # every edge came from the cache
    monkeypatch.setattr(cached_module, "EDGES_KEPT", 50)
    with CachedGraphStore(tmp_path / "published.sqlite") as cached:
        for _ in range(2):
            assert [cached.neighbourhood(center, 2) for center in centers] == expected
            assert len(cached._edges_read) <= 50


def test_open_read_only_needs_an_existing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        SqliteGraphStore.open_read_only(tmp_path / "absent.sqlite")
    assert not Path(tmp_path / "absent.sqlite").exists()
