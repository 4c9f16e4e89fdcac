"""Graph layer across sources: references one source makes to another's tickets, commits
and files become edges once their target exists, whatever order the sources refresh in."""

import json
import time
from collections import defaultdict

import dagster as dg
import polars as pl
from dagster_duckdb import DuckDBResource

from jarvis_assets.graph import GRAPH_POOL, knowledge_graph
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_core.graph.model import EXPLICIT, Edge, Node
from jarvis_core.sources.people import Identity, PersonDirectory
from jarvis_core.sources.references import CROSS_EXTRACTOR, CROSS_ORIGIN_PREFIX, ReferenceIndex
from jarvis_core.stores import tables
from jarvis_resources import GraphStoreResource

# Reasons listed in unresolved_references ('no_such_file': most path-like words are not paths).
_LISTED = ("unresolved", "ambiguous", "unknown_project", "no_such_commit")
# Reasons the unresolved_references check warns about: a ticket that should exist.
WARN_REASONS = ("unresolved", "ambiguous")


def resolve_references(references: list[dict], nodes: list[dict]
                       ) -> tuple[list[Edge], list[dict]]:
    """Edges for the references whose target is one node of any source (evidence merged
    per citing document, relation and target), and the rows of those that are not."""
    index = ReferenceIndex(nodes)
    known = {node["node_key"] for node in nodes}
    grouped: dict[tuple[str, str, str, str, str], list[dict]] = defaultdict(list)
    unresolved = []
    for ref in references:
        keys, reason = index.resolve(ref["kind"], ref["target"])
        if reason != "resolved":
            if reason in _LISTED:
                unresolved.append({**ref, "reason": reason, "candidates": list(keys)})
            continue
        src, dst = (keys[0], ref["src"]) if ref["inverse"] else (ref["src"], keys[0])
        if src != dst and src in known and dst in known:
            grouped[(src, ref["relation"], dst, ref["origin"], ref["source"])].append(ref)
    edges = []
    for (src, relation, dst, origin, source), refs in sorted(grouped.items()):
        shown = min(refs, key=lambda ref: (not ref["evidence"], ref["line"]))
        evidence = tuple(sorted({chunk for ref in refs for chunk in ref["evidence"] or ()}))
        edges.append(Edge(src, dst, relation, EXPLICIT, CROSS_EXTRACTOR,
                          CROSS_ORIGIN_PREFIX + origin, source, evidence,
                          shown["evidence_text"] or shown["written"]))
    return edges, unresolved


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


def _edge_row(edge: Edge) -> dict:
    return {"edge_key": edge.key, "source": edge.source, "origin": edge.origin,
            "src": edge.src, "dst": edge.dst, "relation": edge.relation,
            "confidence": edge.confidence, "extractor": edge.extractor,
            "evidence": list(edge.evidence), "evidence_text": edge.evidence_text,
            "weight": edge.weight}


def _replace_origins(conn, table: str, origins: set[str] | None, rows: pl.DataFrame) -> None:
    """Delete the rows of ``origins`` of any source (all rows for None) and insert ``rows``,
    in one transaction."""
    doomed = pl.DataFrame({"origin": sorted(origins or ())}, schema={"origin": pl.Utf8})
    conn.register("jarvis_doomed", doomed.to_arrow())
    conn.register("jarvis_rows", rows.to_arrow())
    try:
        with tables.transaction(conn):
            conn.execute(f"DELETE FROM {table}" if origins is None else
                         f"DELETE FROM {table} WHERE origin IN (SELECT origin FROM jarvis_doomed)")
            if rows.height:
                conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM jarvis_rows")
    finally:
        conn.unregister("jarvis_doomed")
        conn.unregister("jarvis_rows")


@dg.asset(
    deps=[knowledge_graph],
    group_name="graph",
    kinds={"duckdb", "sqlite", "neo4j"},
    pool=GRAPH_POOL,
    automation_condition=dg.AutomationCondition.eager(),
)
def cross_source_links(context: dg.AssetExecutionContext, duckdb: DuckDBResource,
                       graph: GraphStoreResource) -> dg.MaterializeResult:
    """Edges from notes, commits and tickets to the tickets, commits and files they cite in
    other sources (commit -FIXES-> ticket, note -MENTIONS-> commit, ticket -MENTIONS-> file,
    ticket -BLOCKS-> ticket of another set...), each with the citing chunks as evidence, and
    SAME_AS between person nodes that sources keyed apart but that are one person.

    Every source's graph run records its references in ``graph_references``; this asset
    resolves all of them against the nodes of every source, rewrites the cross-source edges
    of citing documents whose resolution changed, and lists what resolves to nothing (or to
    several nodes) in ``unresolved_references``.
    """
    started = time.perf_counter()
    with duckdb.get_connection() as conn:
        tables.ensure_schema(conn)
        references = tables.read_frame(conn, "SELECT * FROM graph_references").to_dicts()
        nodes = tables.read_frame(
            conn, "SELECT DISTINCT ON (node_key) node_key, type, title, node_source, properties "
                  "FROM graph_nodes WHERE type IN ('ticket', 'commit', 'file', 'note', "
                  "'repo_doc', 'person') ORDER BY node_key, source").to_dicts()
        persons = tables.read_frame(  # every source's copy: each knows other spellings
            conn, "SELECT node_key, title, properties, source FROM graph_nodes "
                  "WHERE type = 'person' ORDER BY source, node_key").to_dicts()
        existing: dict[str, set[str]] = defaultdict(set)
        for origin, edge_key in conn.execute(
                "SELECT origin, edge_key FROM graph_edges WHERE extractor = ?",
                [CROSS_EXTRACTOR]).fetchall():
            existing[origin].add(edge_key)

    edges, unresolved = resolve_references(references, nodes)
    edges += same_person_edges(persons)
    by_origin: dict[str, list[Edge]] = defaultdict(list)
    for edge in edges:
        by_origin[edge.origin].append(edge)
    changed = {origin for origin in set(by_origin) | set(existing)
               if {edge.key for edge in by_origin.get(origin, [])} != existing.get(origin, set())}
    rewritten = [edge for origin in sorted(changed) for edge in by_origin.get(origin, [])]
    endpoints = {edge.src for edge in rewritten} | {edge.dst for edge in rewritten}
    with graph.open() as graph_store:  # endpoints upserted as stored, so none can be absent
        graph_store.apply(removed_origins=changed, nodes=[
            Node(n["node_key"], n["type"], n["title"], n["node_source"],
                 json.loads(n["properties"] or "{}"))
            for n in nodes if n["node_key"] in endpoints], edges=rewritten)
        dangling = graph_store.dangling_edges()
    mentions = [{"source": edge.source, "origin": edge.origin, "chunk_id": chunk_id,
                 "node_key": edge.dst} for edge in rewritten for chunk_id in edge.evidence]
    with duckdb.get_connection() as conn:
        _replace_origins(conn, "graph_edges", changed,
                         tables.frame("graph_edges", map(_edge_row, rewritten)))
        _replace_origins(conn, "chunk_mentions", changed, tables.frame("chunk_mentions", mentions))
        _replace_origins(conn, "unresolved_references", None,
                         tables.frame("unresolved_references", unresolved))

    by_relation: dict[str, int] = defaultdict(int)
    for edge in edges:
        by_relation[edge.relation] += 1
    by_reason: dict[str, int] = defaultdict(int)
    for row in unresolved:
        by_reason[row["reason"]] += 1
    counts = {"references": len(references), "edges": len(edges),
              "origins_rewritten": len(changed), "unresolved": len(unresolved)}
    context.log.info(f"cross-source links {counts}")
    return dg.MaterializeResult(metadata={
        **counts,
        "dagster/row_count": len(edges),
        "dangling_edges_in_store": dangling,
        "edges_by_relation": counts_table(dict(sorted(by_relation.items()))),
        "unresolved_by_reason": counts_table(dict(sorted(by_reason.items()))),
        "unresolved_examples": markdown_table(
            unresolved, ["source", "origin", "written", "reason", "line"], limit=20),
        "edge_examples": markdown_table(
            [_edge_row(edge) for edge in edges], ["src", "relation", "dst", "evidence_text"],
            limit=20),
        "seconds": round(time.perf_counter() - started, 3),
    })


@dg.asset_check(asset=cross_source_links, blocking=True,
                description="Every cross-source edge ends at stored nodes, in DuckDB and the "
                "graph store, and cites existing chunks and a line.")
def cross_source_edges_valid(duckdb: DuckDBResource,
                             graph: GraphStoreResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        invalid = tables.read_frame(conn, """
            WITH cited AS (
                SELECT edge_key, unnest(evidence) AS chunk_id FROM graph_edges
                WHERE extractor = $1
            ), unknown AS (
                SELECT edge_key, count(*) AS unknown_chunks FROM cited
                WHERE chunk_id NOT IN (SELECT chunk_id FROM chunks) GROUP BY edge_key
            ), judged AS (
                SELECT e.origin, e.relation, e.dst,
                       NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.node_key = e.src)
                       OR NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.node_key = e.dst)
                           AS dangling,
                       coalesce(trim(e.evidence_text), '') = '' AS no_text,
                       coalesce(u.unknown_chunks, 0) AS unknown_chunks
                FROM graph_edges e LEFT JOIN unknown u USING (edge_key)
                WHERE e.extractor = $1
            )
            SELECT * FROM judged WHERE dangling OR no_text OR unknown_chunks > 0
        """, [CROSS_EXTRACTOR]).to_dicts()
    with graph.open() as graph_store:
        in_store = graph_store.dangling_edges()
    return dg.AssetCheckResult(
        passed=not invalid and in_store == 0,
        metadata={"invalid_edges": len(invalid), "dangling_in_store": in_store,
                  "examples": markdown_table(invalid, ["origin", "relation", "dst", "dangling",
                                                       "no_text", "unknown_chunks"])})


@dg.asset_check(asset=cross_source_links,
                description="Tickets cited by key that no ticket set holds (or that several "
                "match), listed in unresolved_references (warning).")
def unresolved_ticket_references(duckdb: DuckDBResource) -> dg.AssetCheckResult:
    with duckdb.get_connection() as conn:
        rows = tables.read_frame(
            conn, "SELECT source, origin, written, reason, line FROM unresolved_references "
                  "WHERE list_contains(?, reason) ORDER BY source, origin, line",
            [list(WARN_REASONS)]).to_dicts()
    return dg.AssetCheckResult(
        passed=not rows, severity=dg.AssetCheckSeverity.WARN,
        metadata={"unresolved": len(rows),
                  "examples": markdown_table(rows, ["source", "origin", "written", "reason",
                                                    "line"], limit=20)})


cross_link_checks = [cross_source_edges_valid, unresolved_ticket_references]
