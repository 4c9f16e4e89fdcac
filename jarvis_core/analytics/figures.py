"""Vault analytics: time-stamped snapshots of a source's structure, kept as history.

A snapshot is computed from the DuckDB tables (notes and the graph tables) and records the
content hash of the graph it was computed from (``graph_content_hash``), so a reader can tell
whether the published graph has moved on since (``is_stale``) with one query.

Definitions (notes are the source's notes; a *link* is an explicit edge of any relation
between two different notes of the source — wikilinks, embeds, markdown links, frontmatter
relations and typed relations; tags, URLs, attachments and inferred SIMILAR_TO edges are not
links; several links between the same two notes count once):

- ``links_out`` / ``links_in``: distinct notes a note links to / is linked from;
  ``degree``: distinct notes linked either way.
- orphan: no link in or out. Dead end: linked to, but links to no note.
- hubs: the notes with the highest degree (ties by PageRank); PageRank on the directed link
  graph (damping 0.85, dangling notes spread uniformly).
- communities: Leiden (leidenalg, RB configuration model at ``community_resolution``, seeded)
  on the undirected link graph of the notes that have links; orphans belong to none.
- cross-source figures (tickets by status, commits per author, most-cited tickets, notes
  linked to code) appear for the sources they apply to, once those sources exist.
- stale: not modified for ``stale_after_days`` (frontmatter ``updated``, else the file's mtime)
  yet linked from at least ``stale_min_links_in`` notes.
- quality (0-100), see ``QUALITY_FORMULA``."""

from __future__ import annotations

import posixpath
import statistics
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta

import duckdb

from jarvis_core.analytics.history import AnalyticsSnapshot, graph_content_hash
from jarvis_core.settings import AnalyticsSettings
from jarvis_core.stores import tables

QUALITY_FORMULA = ("quality = 100 × (0.35·min(words/300, 1) + 0.25·min(links_out/3, 1) + "
                   "0.15·min(links_in/3, 1) + 0.10·min(headings/3, 1) + 0.15·frontmatter), "
                   "frontmatter = 1 when the note has a frontmatter block that parses")


LIST_LIMIT = 200          # longest list a snapshot's figures keep (counts stay exact)


# Node types that stand for code: a note linked to one of them is "linked to code".
CODE_TYPES = ("commit", "file", "repo_doc", "component")


def quality_score(words: int, links_out: int, links_in: int, headings: int,
                  frontmatter: bool) -> float:
    """See QUALITY_FORMULA: rewards substance, connections and structure, each capped."""
    score = (0.35 * min(words / 300, 1) + 0.25 * min(links_out / 3, 1)
             + 0.15 * min(links_in / 3, 1) + 0.10 * min(headings / 3, 1)
             + 0.15 * bool(frontmatter))
    return round(100 * score, 1)


def _note_rows(conn: duckdb.DuckDBPyConnection, source: str) -> list[dict]:
    return tables.read_frame(conn, """
        SELECT note_key, path, title, coalesce(word_count, 0) AS words,
               len(coalesce(headings, [])) AS headings,
               coalesce(frontmatter, '{}') NOT IN ('{}', 'null') AND frontmatter_error IS NULL
                   AS frontmatter,
               modified_at
        FROM notes WHERE source = ? ORDER BY path
    """, [source]).to_dicts()


def _note_links(conn: duckdb.DuckDBPyConnection, source: str) -> list[tuple[str, str]]:
    return conn.execute("""
        SELECT DISTINCT e.src, e.dst FROM graph_edges e
        WHERE e.source = $1 AND e.confidence = 'explicit' AND e.src <> e.dst
          AND e.src IN (SELECT note_key FROM notes WHERE source = $1)
          AND e.dst IN (SELECT note_key FROM notes WHERE source = $1)
        ORDER BY 1, 2
    """, [source]).fetchall()


def _note_tags(conn: duckdb.DuckDBPyConnection, source: str) -> list[tuple[str, str]]:
    return conn.execute("""
        SELECT DISTINCT src, substr(dst, 5) FROM graph_edges
        WHERE source = $1 AND relation = 'TAGGED' AND starts_with(dst, 'tag:')
          AND src IN (SELECT note_key FROM notes WHERE source = $1)
    """, [source]).fetchall()


def _broken_links(conn: duckdb.DuckDBPyConnection, source: str,
                  paths: dict[str, str]) -> list[dict]:
    grouped: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for origin, target, reason, line in conn.execute(
            "SELECT origin, target, reason, line FROM graph_broken_links WHERE source = ? "
            "ORDER BY target, origin, line", [source]).fetchall():
        grouped[(target, reason)].append({"path": paths.get(origin, origin), "line": line})
    return sorted(({"target": target, "reason": reason, "count": len(sources),
                    "sources": sources} for (target, reason), sources in grouped.items()),
                  key=lambda b: (-b["count"], b["target"].lower()))


def cross_source_figures(conn: duckdb.DuckDBPyConnection, source: str, limit: int) -> dict:
    """Figures that involve repositories and ticket sets; only those that have data."""
    figures = {}
    by_status = conn.execute("""
        SELECT coalesce(json_extract_string(properties, '$.status'), '(none)') AS status,
               count(*) FROM graph_nodes WHERE source = ? AND type = 'ticket'
        GROUP BY ALL ORDER BY 2 DESC, 1
    """, [source]).fetchall()
    if by_status:
        figures["tickets_by_status"] = dict(by_status)
    authors = conn.execute("""
        SELECT any_value(p.title), count(DISTINCT e.dst) AS commits FROM graph_edges e
        JOIN graph_nodes p ON p.node_key = e.src AND p.type = 'person'
        JOIN graph_nodes c ON c.node_key = e.dst AND c.type = 'commit' AND c.source = $1
        WHERE e.relation = 'AUTHORED' GROUP BY p.node_key ORDER BY commits DESC, 1 LIMIT $2
    """, [source, limit]).fetchall()
    if authors:    # people as the graph canonicalises them (name variants merged)
        figures["commits_per_author"] = [{"author": a, "commits": n} for a, n in authors]
    # by key: the copies of a ticket that several ticket sets hold count as one (a node stored
    # before keys carried their source has no 'key' property: its node key is 'ticket:<KEY>')
    cited = conn.execute("""
        SELECT coalesce(json_extract_string(t.properties, '$.key'),
                        replace(t.node_key, 'ticket:', '')) AS ticket,
               any_value(t.title), count(DISTINCT e.origin) AS citations
        FROM graph_edges e JOIN graph_nodes t ON t.node_key = e.dst AND t.type = 'ticket'
        WHERE (e.source = $1 OR t.source = $1) AND e.src <> e.dst AND e.relation <> 'SAME_AS'
        GROUP BY ticket ORDER BY citations DESC, ticket LIMIT $2
    """, [source, limit]).fetchall()
    if cited:
        figures["most_cited_tickets"] = [{"ticket": key, "title": title, "citations": n}
                                         for key, title, n in cited]
    to_code = conn.execute("""
        SELECT n.path, count(DISTINCT e.dst) FROM graph_edges e
        JOIN notes n ON n.note_key = e.src AND n.source = $1
        JOIN graph_nodes c ON c.node_key = e.dst AND list_contains($2, c.type)
                          AND c.node_source IS DISTINCT FROM $1
        WHERE e.source = $1 GROUP BY n.path ORDER BY 2 DESC, 1
    """, [source, list(CODE_TYPES)]).fetchall()
    if to_code:
        figures["notes_linked_to_code"] = {
            "count": len(to_code),
            "notes": [{"path": path, "code_nodes": n} for path, n in to_code[:limit]]}
    return figures


def _pagerank_and_communities(keys: list[str], links: list[tuple[str, str]],
                              settings: AnalyticsSettings) -> tuple[list[float], list[int], float]:
    """PageRank of every note; Leiden community per note (-1 for notes without links),
    numbered by size, largest first; the partition's modularity."""
    import igraph as ig
    import leidenalg

    index = {key: i for i, key in enumerate(keys)}
    pairs = [(index[src], index[dst]) for src, dst in links]
    directed = ig.Graph(n=len(keys), edges=pairs, directed=True)
    pagerank = directed.pagerank(damping=0.85) if keys else []
    linked = sorted({i for pair in pairs for i in pair})
    if not linked:
        return pagerank, [-1] * len(keys), 0.0
    undirected = directed.induced_subgraph(linked).as_undirected(mode="collapse")
    partition = leidenalg.find_partition(
        undirected, leidenalg.RBConfigurationVertexPartition,
        resolution_parameter=settings.community_resolution, seed=settings.community_seed,
        n_iterations=2)
    groups = sorted((sorted(linked[v] for v in members) for members in partition),
                    key=lambda members: (-len(members), keys[members[0]]))
    community = [-1] * len(keys)
    for number, members in enumerate(groups):
        for i in members:
            community[i] = number
    modularity = undirected.modularity([community[i] for i in linked])
    return pagerank, community, round(modularity, 6)


def compute_snapshot(conn: duckdb.DuckDBPyConnection, source: str,
                     settings: AnalyticsSettings, now: datetime) -> AnalyticsSnapshot:
    """Every figure of one source at ``now`` (naive UTC), from the tables ``conn`` holds."""
    started = time.perf_counter()
    content_hash = graph_content_hash(conn, source)
    notes = _note_rows(conn, source)
    links = _note_links(conn, source)
    keys = [note["note_key"] for note in notes]
    paths = {note["note_key"]: note["path"] for note in notes}
    out_links: dict[str, set[str]] = defaultdict(set)
    in_links: dict[str, set[str]] = defaultdict(set)
    for src, dst in links:
        out_links[src].add(dst)
        in_links[dst].add(src)
    pagerank, community, modularity = _pagerank_and_communities(keys, links, settings)
    stale_before = now - timedelta(days=settings.stale_after_days)
    tags_of: dict[str, list[str]] = defaultdict(list)
    for key, tag in _note_tags(conn, source):
        tags_of[key].append(tag)

    for i, note in enumerate(notes):
        key = note["note_key"]
        links_out, links_in = len(out_links[key]), len(in_links[key])
        note.update(
            folder=posixpath.dirname(note["path"]) or "/", links_out=links_out,
            links_in=links_in, degree=len(out_links[key] | in_links[key]),
            pagerank=round(pagerank[i], 8), community=community[i],
            quality=quality_score(note["words"], links_out, links_in, note["headings"],
                                  note["frontmatter"]),
            orphan=links_out == 0 and links_in == 0, dead_end=links_in > 0 and links_out == 0,
            stale=(note["modified_at"] is not None and note["modified_at"] < stale_before
                   and links_in >= settings.stale_min_links_in))

    broken = _broken_links(conn, source, paths)
    top = settings.top_n
    figures = {
        "totals": _totals(notes, links, tags_of, broken, community, modularity),
        "words": _word_figures(notes),
        "orphans": [n["path"] for n in notes if n["orphan"]][:LIST_LIMIT],
        "dead_ends": [n["path"] for n in notes if n["dead_end"]][:LIST_LIMIT],
        "broken_links": broken[:LIST_LIMIT],
        "hubs": [_brief(n) for n in sorted(
            notes, key=lambda n: (-n["degree"], -n["pagerank"], n["path"]))[:top]
            if n["degree"] > 0],
        "communities": _communities(notes, tags_of, top),
        "tags": [{"tag": tag, "notes": count} for tag, count in sorted(
            Counter(t for tags in tags_of.values() for t in tags).items(),
            key=lambda item: (-item[1], item[0]))][:LIST_LIMIT],
        "stale_notes": [{"path": n["path"], "modified_at": n["modified_at"].isoformat(),
                         "days_untouched": (now - n["modified_at"]).days,
                         "links_in": n["links_in"]}
                        for n in sorted(notes, key=lambda n: (-n["links_in"], n["path"]))
                        if n["stale"]][:LIST_LIMIT],
        "folders": _folders(notes, broken),
        "quality": _quality_figures(notes, top),
        "degree_distribution": {str(degree): count for degree, count in
                                sorted(Counter(n["degree"] for n in notes).items())},
        "cross_source": cross_source_figures(conn, source, top),
        "settings": settings.model_dump(),
    }
    return AnalyticsSnapshot(
        source=source, snapshot_id=f"{now:%Y%m%dT%H%M%S%fZ}", generated_at=now,
        content_hash=content_hash, figures=figures, notes=notes,
        compute_seconds=round(time.perf_counter() - started, 3))


def _totals(notes, links, tags_of, broken, community, modularity) -> dict:
    return {
        "notes": len(notes), "words": sum(n["words"] for n in notes), "links": len(links),
        "tags": len({t for tags in tags_of.values() for t in tags}),
        "orphans": sum(n["orphan"] for n in notes),
        "dead_ends": sum(n["dead_end"] for n in notes),
        "broken_links": sum(b["count"] for b in broken),
        "broken_targets": len(broken),
        "stale_notes": sum(n["stale"] for n in notes),
        "communities": len({c for c in community if c >= 0}),
        "modularity": modularity,
        "mean_quality": round(statistics.fmean(n["quality"] for n in notes), 2) if notes else 0.0,
    }


def _brief(note: dict) -> dict:
    return {"path": note["path"], "title": note["title"], "degree": note["degree"],
            "links_in": note["links_in"], "links_out": note["links_out"],
            "pagerank": note["pagerank"]}


def _word_figures(notes: list[dict]) -> dict:
    words = [n["words"] for n in notes]
    longest = max(notes, key=lambda n: (n["words"], n["path"]), default=None)
    return {"total": sum(words), "mean": round(statistics.fmean(words), 1) if words else 0.0,
            "median": statistics.median(words) if words else 0,
            "empty_notes": sum(w == 0 for w in words),
            "longest": {"path": longest["path"], "words": longest["words"]} if longest else None}


def _communities(notes: list[dict], tags_of: dict[str, list[str]], top: int) -> list[dict]:
    members: dict[int, list[dict]] = defaultdict(list)
    for note in notes:
        if note["community"] >= 0:
            members[note["community"]].append(note)
    result = []
    for number in sorted(members)[:LIST_LIMIT]:
        ranked = sorted(members[number], key=lambda n: (-n["pagerank"], n["path"]))
        tags = Counter(t for n in ranked for t in tags_of.get(n["note_key"], []))
        result.append({
            "id": number, "size": len(ranked), "label": ranked[0]["title"],
            "top_notes": [n["path"] for n in ranked[:3]],
            "top_tags": [{"tag": t, "notes": c} for t, c in
                         sorted(tags.items(), key=lambda item: (-item[1], item[0]))[:3]],
            "members": [n["path"] for n in sorted(ranked, key=lambda n: n["path"])][:top * 5],
        })
    return result


def _folders(notes: list[dict], broken: list[dict]) -> list[dict]:
    broken_by_path = Counter(s["path"] for b in broken for s in b["sources"])
    by_folder: dict[str, list[dict]] = defaultdict(list)
    for note in notes:
        by_folder[note["folder"]].append(note)
    return [{"folder": folder, "notes": len(group), "words": sum(n["words"] for n in group),
             "links_out": sum(n["links_out"] for n in group),
             "links_in": sum(n["links_in"] for n in group),
             "orphans": sum(n["orphan"] for n in group),
             "broken_links": sum(broken_by_path[n["path"]] for n in group),
             "mean_quality": round(statistics.fmean(n["quality"] for n in group), 2)}
            for folder, group in sorted(by_folder.items())][:LIST_LIMIT]


def _quality_figures(notes: list[dict], top: int) -> dict:
    scores = [n["quality"] for n in notes]
    ranked = sorted(notes, key=lambda n: (n["quality"], n["path"]))
    return {"formula": QUALITY_FORMULA,
            "mean": round(statistics.fmean(scores), 2) if scores else 0.0,
            "median": statistics.median(scores) if scores else 0.0,
            "lowest": [{"path": n["path"], "quality": n["quality"]} for n in ranked[:top]],
            "highest": [{"path": n["path"], "quality": n["quality"]}
                        for n in ranked[::-1][:top]]}
