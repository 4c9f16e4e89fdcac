"""Links between sources: references one source makes to another's tickets, commits and
files become edges once their target exists, whatever order the sources refresh in; the
copies of one item in several sources (a ticket set exported twice) and person nodes that
sources keyed apart but that are one person get SAME_AS edges."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

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
    """Every source's references, the nodes they may resolve to, every person node, and the
    cross-source edges stored now by citing origin."""

    references: list[dict]
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


def read_inputs(conn: duckdb.DuckDBPyConnection) -> CrossInputs:
    existing: dict[str, set[str]] = defaultdict(set)
    for origin, edge_key in conn.execute(
            "SELECT origin, edge_key FROM graph_edges WHERE extractor = ?",
            [CROSS_EXTRACTOR]).fetchall():
        existing[origin].add(edge_key)
    return CrossInputs(
        tables.read_dicts(conn, "SELECT * FROM graph_references")
        + tables.read_dicts(conn, _WIKILINKS_AS_PAGE_TITLES),
        tables.read_dicts(
            conn, "SELECT DISTINCT ON (node_key) node_key, type, title, node_source, properties "
                  "FROM graph_nodes WHERE type IN ('ticket', 'commit', 'file', 'note', "
                  "'repo_doc', 'person', 'thread', 'page', 'symbol') "
                  "ORDER BY node_key, source"),
        tables.read_dicts(  # every source's copy: each knows other spellings
            conn, "SELECT node_key, title, properties, source FROM graph_nodes "
                  "WHERE type = 'person' ORDER BY source, node_key"),
        existing)


@dataclass(frozen=True)
class CrossLinks:
    """The resolved edges, the citing origins whose edges changed, and what did not
    resolve."""

    edges: list[Edge]
    changed: set[str]
    rewritten: list[Edge]
    unresolved: list[dict]


def plan_links(inputs: CrossInputs) -> CrossLinks:
    index = ReferenceIndex(inputs.nodes)
    edges, unresolved = resolve_references(inputs.references, index)
    edges += same_item_edges(index, inputs.nodes) + same_person_edges(inputs.persons)
    by_origin: dict[str, list[Edge]] = defaultdict(list)
    for edge in edges:
        by_origin[edge.origin].append(edge)
    changed = {origin for origin in set(by_origin) | set(inputs.existing)
               if {edge.key for edge in by_origin.get(origin, [])}
               != inputs.existing.get(origin, set())}
    rewritten = [edge for origin in sorted(changed) for edge in by_origin.get(origin, [])]
    return CrossLinks(edges, changed, rewritten, unresolved)


def apply_to_store(store: GraphStore, links: CrossLinks, nodes: list[dict]) -> int:
    """Rewrite the changed origins in the graph store (endpoints upserted as stored, so none
    can be absent); the number of dangling edges after."""
    endpoints = {edge.src for edge in links.rewritten} | {edge.dst for edge in links.rewritten}
    store.apply(removed_origins=links.changed, nodes=[
        Node(n["node_key"], n["type"], n["title"], n["node_source"],
             json.loads(n["properties"] or "{}"))
        for n in nodes if n["node_key"] in endpoints], edges=links.rewritten)
    return store.dangling_edges()


def write_tables(conn: duckdb.DuckDBPyConnection, links: CrossLinks) -> None:
    mentions = [{"source": edge.source, "origin": edge.origin, "chunk_id": chunk_id,
                 "node_key": edge.dst} for edge in links.rewritten for chunk_id in edge.evidence]
    replace_origins(conn, tables.GRAPH_EDGES, links.changed, map(edge_row, links.rewritten))
    replace_origins(conn, tables.CHUNK_MENTIONS, links.changed, mentions)
    replace_origins(conn, tables.UNRESOLVED_REFERENCES, None, links.unresolved)
