"""Links between sources: references one source makes to another's tickets, commits and
files become edges once their target exists, whatever order the sources refresh in; the
copies of one item in several sources (a ticket set exported twice) and person nodes that
sources keyed apart but that are one person get SAME_AS edges."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import duckdb
import polars as pl

from jarvis_core.graph.sync import edge_row
from jarvis_core.sources.code_references import AMBIGUOUS_SYMBOL
from jarvis_core.sources.people import Identity, PersonDirectory
from jarvis_core.sources.references import (
    AMBIGUOUS_DOCUMENT,
    CROSS_EXTRACTOR,
    CROSS_ORIGIN_PREFIX,
    PAGE_TITLE,
    ReferenceIndex,
)
from jarvis_core.stores import tables
from jarvis_core.stores.graph.base import GraphStore
from jarvis_core.stores.graph.elements import EXPLICIT, Edge, Node
from jarvis_core.stores.tables import Connect

# Reasons listed in unresolved_references ('no_such_file': most path-like words are not paths;
# 'no_such_symbol': most backticked words are not code).
_LISTED = ("unresolved", "ambiguous", "unknown_project", "no_such_commit", AMBIGUOUS_DOCUMENT,
           AMBIGUOUS_SYMBOL)
# Reasons the unresolved_references check warns about: a ticket that should exist.
WARN_REASONS = ("unresolved", "ambiguous")


def resolve_references(references: list[dict], index: ReferenceIndex
                       ) -> tuple[list[Edge], list[dict]]:
    """Edges for the references whose target is one item of any source, to each source's
    copy of it (evidence merged per citing document, relation and target), and the rows of
    those that are not."""
    grouped: dict[tuple[str, str, str, str, str], list[dict]] = defaultdict(list)
    unresolved = []
    for ref in references:
        keys, reason = index.resolve(ref["kind"], ref["target"])
        if reason != "resolved":
            if reason in _LISTED:
                unresolved.append({**ref, "reason": reason, "candidates": list(keys)})
            continue
        for key in keys:
            src, dst = (key, ref["src"]) if ref["inverse"] else (ref["src"], key)
            if src != dst and src in index.known and dst in index.known:
                grouped[(src, ref["relation"], dst, ref["origin"], ref["source"])].append(ref)
    edges = []
    for (src, relation, dst, origin, source), refs in sorted(grouped.items()):
        shown = min(refs, key=lambda ref: (not ref["evidence"], ref["line"]))
        evidence = tuple(sorted({chunk for ref in refs for chunk in ref["evidence"] or ()}))
        edges.append(Edge(src, dst, relation, EXPLICIT, CROSS_EXTRACTOR,
                          CROSS_ORIGIN_PREFIX + origin, source, evidence,
                          shown["evidence_text"] or shown["written"]))
    return edges, unresolved


def same_item_edges(index: ReferenceIndex, nodes: list[dict]) -> list[Edge]:
    """SAME_AS edges between the copies of one item several sources hold (the same ticket in
    two exports, a repository configured twice), from each copy to the first key."""
    by_key = {node["node_key"]: node for node in nodes}
    edges = []
    for first, *others in index.copies():
        target = by_key[first]
        for key in others:
            copy = by_key[key]
            edges.append(Edge(key, first, "SAME_AS", EXPLICIT, CROSS_EXTRACTOR,
                              CROSS_ORIGIN_PREFIX + key, copy["node_source"], (),
                              f"{copy['title']} in {copy['node_source']} is "
                              f"{target['title']} in {target['node_source']}"))
    return edges


def same_person_edges(persons: list[dict]) -> list[Edge]:
    """SAME_AS edges between person nodes that different sources keyed differently but
    ``jarvis_core.sources.people`` folds into one person (a GitHub login 'maya-chen' spelling the
    full name of 'Maya Chen <maya.chen@...>'), from each node to the group's canonical key."""
    directory = PersonDirectory()
    identities: dict[str, list[Identity]] = defaultdict(list)
    for row in persons:
        properties = json.loads(row["properties"] or "{}")
        names = properties.get("names") or [row["title"]]
        aliases = tuple(properties.get("aliases") or ())
        for name in names:
            for email in properties.get("emails") or [None]:
                identity = Identity(name=name, email=email, aliases=aliases)
                identities[row["node_key"]].append(identity)
                directory.add(identity)
    groups: dict[str, dict[str, str]] = defaultdict(dict)  # canonical key -> node -> source
    for row in persons:
        found = [directory.person(i) for i in identities[row["node_key"]]]
        if found and found[0] is not None:
            groups[found[0].key].setdefault(row["node_key"], row["source"])
    titles = {row["node_key"]: row["title"] for row in persons}
    edges = []
    for canonical, members in sorted(groups.items()):
        if len(members) < 2:
            continue
        target = canonical if canonical in members else min(members)
        for key, source in sorted(members.items()):
            if key != target:
                edges.append(Edge(key, target, "SAME_AS", EXPLICIT, CROSS_EXTRACTOR,
                                  CROSS_ORIGIN_PREFIX + key, source, (),
                                  f"{titles[key]} is {titles[target]} ({canonical})"))
    return edges


def replace_origins(conn, table: tables.Table, origins: set[str] | None,
                    rows: Iterable[dict]) -> None:
    """Delete the rows of ``origins`` of any source (all rows for None) and insert ``rows``,
    in one transaction."""
    doomed = pl.DataFrame({"origin": sorted(origins or ())}, schema={"origin": pl.Utf8})
    frame = table.frame(rows)
    conn.register("jarvis_doomed", doomed.to_arrow())
    conn.register("jarvis_rows", frame.to_arrow())
    try:
        with tables.transaction(conn):
            conn.execute(f"DELETE FROM {table.name}" if origins is None else
                         f"DELETE FROM {table.name} "
                         "WHERE origin IN (SELECT origin FROM jarvis_doomed)")
            if frame.height:
                conn.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM jarvis_rows")
    finally:
        conn.unregister("jarvis_doomed")
        conn.unregister("jarvis_rows")


@dataclass(frozen=True)
class CrossInputs:
    """The nodes references may resolve to, every person node, and the cross-source edges
    stored now by citing origin: what every batch of references is resolved against."""

    nodes: list[dict]
    persons: list[dict]
    existing: dict[str, set[str]]


# A note's wikilink that resolves to no note may name a wiki page by its title: tried as a
# page-title reference (unresolved ones are nobody's concern: they stay broken links).
_WIKILINKS_AS_PAGE_TITLES = f"""
    SELECT source, origin, origin AS src, 'LINKS_TO' AS relation, '{PAGE_TITLE}' AS kind,
           target, target AS written, line, evidence, '[[' || target || ']]' AS evidence_text,
           false AS inverse
    FROM graph_broken_links WHERE reason = 'unresolved' AND origin LIKE 'note:%'
"""
_REFERENCES = ("SELECT source, origin, src, relation, kind, target, written, line, evidence, "
               "evidence_text, inverse FROM graph_references "
               f"UNION ALL {_WIKILINKS_AS_PAGE_TITLES}")


def read_inputs(conn: duckdb.DuckDBPyConnection) -> CrossInputs:
    existing: dict[str, set[str]] = defaultdict(set)
    for origin, edge_key in conn.execute(
            "SELECT origin, edge_key FROM graph_edges WHERE extractor = ?",
            [CROSS_EXTRACTOR]).fetchall():
        existing[origin].add(edge_key)
    return CrossInputs(
        tables.read_dicts(
            conn, "SELECT DISTINCT ON (node_key) node_key, type, title, node_source, properties "
                  "FROM graph_nodes WHERE type IN ('ticket', 'commit', 'file', 'note', "
                  "'repo_doc', 'person', 'thread', 'page', 'symbol') "
                  "ORDER BY node_key, source"),
        tables.read_dicts(  # every source's copy: each knows other spellings
            conn, "SELECT node_key, title, properties, source FROM graph_nodes "
                  "WHERE type = 'person' ORDER BY source, node_key"),
        existing)


def reference_batches(connect: Connect, origins: int, batch_rows: int
                      ) -> Iterator[list[dict]]:
    """Every source's references (and wikilinks that may name a page), the references of
    ``origins`` citing documents at a time (a document's references are never split),
    each batch read on a connection of its own."""
    after = None
    while True:
        with connect() as conn:
            batch = tables.read_dicts(
                conn, f"WITH refs AS ({_REFERENCES}), "
                      "citing AS (SELECT DISTINCT origin FROM refs "
                      + ("WHERE origin > ? " if after is not None else "")
                      + f"ORDER BY origin LIMIT {origins}) "
                      "SELECT refs.* FROM refs JOIN citing USING (origin) "
                      "ORDER BY origin, line, kind, target, written",
                [] if after is None else [after], batch_rows)
        if not batch:
            return
        yield batch
        after = batch[-1]["origin"]


@dataclass(frozen=True)
class CrossLinks:
    """What the references of a batch of citing origins resolve to: the edges, the origins
    whose edges changed and those edges, and what did not resolve."""

    edges: list[Edge]
    changed: set[str]
    rewritten: list[Edge]
    unresolved: list[dict]


def plan_links(edges: list[Edge], unresolved: list[dict], origins: set[str],
               existing: dict[str, set[str]]) -> CrossLinks:
    """The edges of ``origins`` (citing origins, as the edges name them) compared with those
    stored: an origin whose edge keys moved is rewritten, one with none left emptied."""
    by_origin: dict[str, list[Edge]] = defaultdict(list)
    for edge in edges:
        by_origin[edge.origin].append(edge)
    changed = {origin for origin in origins
               if {edge.key for edge in by_origin.get(origin, [])}
               != existing.get(origin, set())}
    rewritten = [edge for origin in sorted(changed) for edge in by_origin.get(origin, [])]
    return CrossLinks(edges, changed, rewritten, unresolved)


def apply_to_store(store: GraphStore, links: CrossLinks, nodes: dict[str, dict]) -> None:
    """Rewrite the changed origins in the graph store (endpoints upserted as stored, so none
    can be absent)."""
    endpoints = {edge.src for edge in links.rewritten} | {edge.dst for edge in links.rewritten}
    store.apply(removed_origins=links.changed, nodes=[
        Node(n["node_key"], n["type"], n["title"], n["node_source"],
             json.loads(n["properties"] or "{}"))
        for key in sorted(endpoints) if (n := nodes.get(key)) is not None],
        edges=links.rewritten)


def write_tables(conn: duckdb.DuckDBPyConnection, links: CrossLinks, first: bool) -> None:
    """The changed origins' edges and mentions; the unresolved references, all of them
    replaced by the first batch's."""
    mentions = [{"source": edge.source, "origin": edge.origin, "chunk_id": chunk_id,
                 "node_key": edge.dst} for edge in links.rewritten for chunk_id in edge.evidence]
    replace_origins(conn, tables.GRAPH_EDGES, links.changed, map(edge_row, links.rewritten))
    replace_origins(conn, tables.CHUNK_MENTIONS, links.changed, mentions)
    replace_origins(conn, tables.UNRESOLVED_REFERENCES, None if first else set(),
                    links.unresolved)


EXAMPLES = 20  # edges and unresolved references a run shows in its metadata


@dataclass
class CrossRun:
    """What linking the sources did."""

    references: int = 0
    edges: int = 0
    origins_rewritten: int = 0
    unresolved: int = 0
    edges_by_relation: Counter = field(default_factory=Counter)
    unresolved_by_reason: Counter = field(default_factory=Counter)
    edge_examples: list[Edge] = field(default_factory=list)
    unresolved_examples: list[dict] = field(default_factory=list)
    dangling: int = 0

    def add(self, links: CrossLinks, references: int) -> None:
        self.references += references
        self.edges += len(links.edges)
        self.origins_rewritten += len(links.changed)
        self.unresolved += len(links.unresolved)
        self.edges_by_relation.update(edge.relation for edge in links.edges)
        self.unresolved_by_reason.update(row["reason"] for row in links.unresolved)
        self.edge_examples += links.edges[:EXAMPLES - len(self.edge_examples)]
        self.unresolved_examples += links.unresolved[:EXAMPLES - len(self.unresolved_examples)]


def link_sources(connect: Connect, store: GraphStore, *, origins: int,
                 batch_rows: int) -> CrossRun:
    """Resolve every source's references against every source's nodes, the references of
    ``origins`` citing documents at a time (``resources.batch_documents``): each batch's
    changed origins are rewritten in the store and the tables before the next is read. The
    SAME_AS edges between copies of one item and between one person's nodes join the batch
    of their origin; origins left with no edge are emptied at the end."""
    with connect() as conn:
        inputs = read_inputs(conn)
    index = ReferenceIndex(inputs.nodes)
    nodes = {node["node_key"]: node for node in inputs.nodes}
    same: dict[str, list[Edge]] = defaultdict(list)
    for edge in same_item_edges(index, inputs.nodes) + same_person_edges(inputs.persons):
        same[edge.origin].append(edge)
    run, done = CrossRun(), set()

    def link(edges: list[Edge], unresolved: list[dict], origins_here: set[str],
             references: int) -> None:
        links = plan_links(edges, unresolved, origins_here, inputs.existing)
        apply_to_store(store, links, nodes)
        with connect() as conn:
            write_tables(conn, links, first=not done)
        run.add(links, references)
        done.update(origins_here)

    for batch in reference_batches(connect, origins, batch_rows):
        edges, unresolved = resolve_references(batch, index)
        citing = {CROSS_ORIGIN_PREFIX + ref["origin"] for ref in batch}
        for origin in citing & same.keys():
            edges += same.pop(origin)
        link(edges, unresolved, citing, len(batch))
    rest = set(same) | (inputs.existing.keys() - done)
    link([edge for origin in sorted(same) for edge in same[origin]], [], rest, 0)
    run.dangling = store.dangling_edges()
    return run
