"""Readable text for every answer of the query API, the same in the terminal (`jarvis …`) and
in the MCP tools' text content. Each function takes the answer's dict, whose search hits are
``Hit``s (jarvis_query/results.py)."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jarvis_query.results import Hit

from jarvis_core.sources import registry

SHOWN_PAIRS = 20  # note pairs listed per relation in graph search
SHOWN_HEADINGS = 3  # a document hit's matching headings listed (the JSON has them all)


def table(rows: list[dict], columns: list[str], indent: str = "") -> str:
    """Rows as aligned columns under a header and a rule."""
    widths = {c: max([len(c), *(len(str(r.get(c, ""))) for r in rows)]) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns),
             "  ".join("-" * widths[c] for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(indent + line.rstrip() for line in lines)


def render_json(data: dict) -> str:
    """For answers whose structure is their content."""
    return json.dumps(data, indent=1, ensure_ascii=False, default=str)


def embeddings_lines(data: dict) -> list[str]:
    """The note an answer carries while the published version's embeddings are incomplete."""
    embeddings = data.get("embeddings")
    return [f"note: {embeddings['message']}"] if embeddings and embeddings["message"] else []


def _hit_lines(hits: list[Hit]) -> list[str]:
    lines = []
    for rank, hit in enumerate(hits, 1):
        heading = f" › {hit.heading}" if hit.heading else ""
        legs = ""
        if hit.fused:
            legs = (f"  (keyword #{hit.keyword_rank or '–'}, "
                    f"semantic #{hit.semantic_rank or '–'})")
        named = f"  [named: {hit.identifier}]" if hit.identifier else ""
        lines.append(f"{rank:>2}. {hit.score:.4f}  {hit.vault}/{hit.path}{heading}{legs}{named}")
        if hit.chunks and hit.chunks > 1:
            headings = list(hit.headings or ())
            shown_headings = "; ".join(headings[:SHOWN_HEADINGS]) + (
                " …" if len(headings) > SHOWN_HEADINGS else "")
            lines.append(f"    {hit.chunks} matching chunks"
                         + (f": {shown_headings}" if headings else ""))
        if hit.snippet:
            lines.append(f"    {hit.snippet}")
    return lines


def render_results(data: dict) -> str:
    """Ranked chunk or document hits (semantic, keyword, hybrid): score, place, heading,
    which leg found it (hybrid), snippet."""
    results, query = data["results"], data.get("query", "")
    if not results:
        return "\n".join([*embeddings_lines(data), f"no results for {query!r}"])
    plural = "" if len(results) == 1 else "s"
    return "\n".join([*embeddings_lines(data), f"{len(results)} result{plural} for {query!r}",
                      *_hit_lines(results)])


def _relation_lines(relation: str, edges: list[dict]) -> list[str]:
    """One line per pair of nodes, with how many edges of the relation join them."""
    pairs = Counter((edge["src_title"], edge["dst_title"]) for edge in edges)
    lines = [f"{relation} ({len(edges)})"]
    for (src, dst), count in list(pairs.items())[:SHOWN_PAIRS]:
        lines.append(f"  {src} → {dst}" + (f"  ×{count}" if count > 1 else ""))
    if len(pairs) > SHOWN_PAIRS:
        lines.append(f"  … {len(pairs) - SHOWN_PAIRS} more pairs")
    return lines


def render_graph(data: dict) -> str:
    """A note's neighbourhood: counts, relationships by type (repeated pairs counted once,
    with how many edges join them), the notes with their distance and tags."""
    if not data["available"]:
        return "\n".join([data["message"], *embeddings_lines(data),
                          "semantic results instead:", *_hit_lines(data["fallback"])])
    center = data["center"]
    counts = ", ".join(f"{n} {what}" for what, n in data["counts"].items()
                       if what != "by_relation")
    lines = [f"{center['title']} ({data['vault']}/{data['path']}), depth {data['depth']}: "
             f"{counts}"]
    for relation, edges in data["relationships"].items():
        lines += ["", *_relation_lines(relation, edges)]
    lines += ["", "notes:"]
    for found in data["notes"]:
        tags = f"  #{' #'.join(found['tags'])}" if found["tags"] else ""
        lines.append(f"  [{found['distance']}] {found['title']}{tags}")
    return "\n".join(lines)


def render_graphrag(data: dict) -> str:
    """The evidence pack's context block: what an assistant reads."""
    context = data.get("context")
    if not isinstance(context, str) or not context:
        return render_json(data)
    return "\n".join([*embeddings_lines(data), context])


def render_graphrag_ranking(data: dict) -> str:
    """The pack's ranking with each score component, and its size."""
    lines = [data["graph_message"]] if data["graph_message"] else []
    lines += embeddings_lines(data)
    rows = [{"#": s["rank"], "score": s["score"], **s["components"],
             "via": s["found_by"], "links": len(s["evidence"]),
             "source": f"{s['vault']}/{s['path']}"} for s in data["sources"]]
    lines.append(table(rows, ["#", "score", "semantic", "graph", "centrality", "recency",
                              "via", "links", "source"]))
    subgraph = data["subgraph"]
    lines.append(f"\nsubgraph: {len(subgraph['nodes'])} nodes, {len(subgraph['edges'])} edges; "
                 f"context: {data['tokens']} of {data['max_tokens']} tokens"
                 + (" (cut to fit)" if data["truncated"] else ""))
    return "\n".join(lines)


def _refs(entries: list[dict] | None) -> str:
    """Graph neighbours: a document by its source and path (to open it by), any other node
    by its title, with the relations involved."""
    if entries is None:
        return "(nothing published yet)"
    return ", ".join(
        f"{e['title'] or e['key']}"
        + (f" [{e['vault']}/{e['path']}]" if e.get("path") else "")
        + f" ({'/'.join(e['relations'])})" for e in entries) or "none"


def _shown(value) -> str | None:
    """A detail's value in a line, or None when there is nothing to show."""
    if value is None or value is False or value in ("", [], {}):
        return None
    if isinstance(value, list):
        return ", ".join(str(item) for item in value)
    if isinstance(value, dict):
        return ", ".join(f"{key}: {item}" for key, item in value.items())
    return str(value)


def _row(row: dict, named: str | None) -> str:
    """One row of a detail list: its first value, which names it, then the others'."""
    first, *rest = row.items()
    marker = "→ " if named is not None and str(first[1]).lower() == named else "- "
    shown = [(key, _shown(value)) for key, value in rest]
    return marker + ", ".join([str(first[1]), *(f"{key.replace('_', ' ')}: {value}"
                                                for key, value in shown if value is not None)])


def render_document(data: dict) -> str:
    """Any read document: a header (title, source and path, kind, dates), its key, tags and
    kind's details, its links and backlinks in the graph, then its text."""
    dates = ", ".join(f"{label} {data[field][:19]}" for label, field in (
        ("created", "created_at"), ("modified", "modified_at")) if data[field])
    lines = [f"# {data['title']}  ({data['vault']}/{data['path']}, {data['kind']}"
             + (f", {dates}" if dates else "") + ")", f"key: {data['key']}"]
    if data["tags"]:
        lines.append("tags: " + " ".join(f"#{tag}" for tag in data["tags"]))
    for name, value in data["details"].items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            lines += [f"{name.replace('_', ' ')}:",
                      *(_row(row, data["named"]) for row in value)]
        elif (shown := _shown(value)) is not None:
            lines.append(f"{name.replace('_', ' ')}: {shown}")
    lines += [f"links: {_refs(data['links'])}", f"backlinks: {_refs(data['backlinks'])}",
              *(f"warning: {w}" for w in data["warnings"]), "", data["content"]]
    return "\n".join(lines)


def _source_counts(source: dict) -> str:
    """What a source holds, in its kind's words: notes and attachments, commits, tickets,
    messages and threads, pages."""
    return ", ".join(f"{source[layer]} {layer.replace('_', ' ')}"
                     for layer in registry.kind(source["kind"]).counts)


def render_vaults(data: dict) -> str:
    """One line per source, with its kind and what it holds, under the published version."""
    published = data["published"]
    lines = [f"published version {published['version']} at {published['published_at'][:19]}Z"
             if published else "nothing published yet: run `jarvis refresh`"]
    lines += _version_notes(published)
    for source in data["vaults"] + data["other_sources"]:
        chunks = ", ".join(f"{n} {kind}" for kind, n in source["chunks"].items())
        lines.append(f"- {source['name']} ({source['kind']}, "
                     f"{source['path']}): {_source_counts(source)}; chunks: "
                     f"{chunks or 'none published'}; {source['failed']} failed")
    return "\n".join(lines)


def _version_notes(published: dict | None) -> list[str]:
    """Newer versions passed over (corrupt or locked) and incomplete embeddings."""
    if not published:
        return []
    lines = [f"serving version {problem['version']} is {problem['state']} "
             f"({problem['reason']}): showing version {published['version']}"
             for problem in published.get("unreadable", [])]
    return lines + embeddings_lines(published)


def render_notifications(data: dict) -> str:
    """Failure notices, newest first, each with its failed steps and message."""
    lines = [] if data["notifications"] else ["no failure notices"]
    for notice in data["notifications"]:
        steps = f" (steps: {', '.join(notice['failed_steps'])})" if notice["failed_steps"] else ""
        lines += [f"{notice['created_at']}  {notice['title']}{steps}",
                  f"    {notice['message']}"]
    return "\n".join(lines)


def render_status(data: dict) -> str:
    """The data directory, the published version and one row per source."""
    published = data["published"]
    rows = [{**source, "published": "yes" if source["published"] else "no"}
            for source in data["sources"]]
    return "\n".join([
        f"data directory: {data['data_dir']}",
        f"published: {published['version']} ({published['model']}) at "
        f"{published['published_at'][:19]}Z", *_embedding_lines(published),
        *_version_notes(published),
        table(rows, ["name", "kind", "published", *data["totals"], "path"])])


def _embedding_lines(published: dict) -> list[str]:
    """How the version's vectors were embedded: the backend, its precision and why."""
    embedding = published.get("embedding")
    return [f"embedded with {embedding['backend']} ({embedding['precision']}): "
            f"{embedding['reason']}"] if embedding else []


def _figure_lines(name: str, value: dict | list) -> list[str]:
    """One cross-source figure: a list of rows as a table, a mapping of counts on one line,
    a count with its rows as a titled table."""
    title = name.replace("_", " ")
    if isinstance(value, list):
        return ["", f"{title} ({len(value)}):", table(value, list(value[0]), "  ")] \
            if value else []
    rows = [entry for entry in value.values() if isinstance(entry, list)]
    if not rows:
        return ["", f"{title}: " + ", ".join(f"{key} {n}" for key, n in value.items())]
    lines = ["", f"{title} ({value.get('count', len(rows[0]))}):"]
    for listed in rows:
        lines += [table(listed, list(listed[0]), "  ")] if listed else []
    return lines


def _vault_summary(data: dict) -> list[str]:
    summary = data["summary"]
    lines = [
        f"  {summary['notes']} notes, {summary['words']:,} words, {summary['links']} links, "
        f"{summary['tags']} tags; {summary['orphans']} orphans, {summary['dead_ends']} dead "
        f"ends, {summary['broken_links']} broken links ({summary['broken_targets']} targets), "
        f"{summary['stale_notes']} stale notes; {summary['communities']} communities "
        f"(modularity {summary['modularity']:.2f}); mean quality {summary['mean_quality']:.1f}"]
    if data["changes"]:
        moved = [f"{name} {value:+g}" for name, value in data["changes"].items() if value]
        lines.append("  since the previous snapshot: " + (", ".join(moved) or "no change"))
    return lines


def _vault_sections(data: dict, limit: int) -> list[str]:
    figures, summary = data["figures"], data["summary"]
    sections = [
        ("hubs", figures["hubs"], ["degree", "links_in", "links_out", "pagerank", "path"]),
        ("communities", [{**c, "top_notes": ", ".join(p.rsplit("/", 1)[-1].removesuffix(".md")
                                                      for p in c["top_notes"]),
                          "top_tags": ", ".join(t["tag"] for t in c["top_tags"])}
                         for c in figures["communities"]],
         ["id", "size", "label", "top_tags", "top_notes"]),
        ("broken links", [{**b, "sources": ", ".join(f"{s['path']}:{s['line']}"
                                                     for s in b["sources"])}
                          for b in figures["broken_links"]],
         ["target", "reason", "count", "sources"]),
        ("stale notes", figures["stale_notes"], ["days_untouched", "links_in", "path"]),
        ("folders", figures["folders"], ["folder", "notes", "words", "links_out", "links_in",
                                         "orphans", "broken_links", "mean_quality"]),
        ("lowest quality", figures["quality"]["lowest"], ["quality", "path"]),
        ("trend", data["trend"][-limit:], ["generated_at", "notes", "links", "orphans",
                                           "dead_ends", "broken_links", "stale_notes"]),
    ]
    lines = []
    for title, rows, columns in sections:
        if rows:
            shown = rows if title == "folders" else rows[:limit]
            lines += ["", f"{title} ({len(rows)}):", table(shown, columns, "  ")]
    for title in ("orphans", "dead_ends"):
        if figures[title]:
            lines += ["", f"{title.replace('_', ' ')} ({summary[title]}):",
                      *(f"  {path}" for path in figures[title][:limit])]
    if figures["tags"]:
        lines += ["", "tags: " + ", ".join(f"#{t['tag']} {t['notes']}"
                                           for t in figures["tags"][:limit * 2])]
    return lines


def render_vault_context(data: dict, limit: int = 10) -> str:
    """A source's newest analytics snapshot: for a vault its figures, lists and trend; for
    a repository or ticket set the cross-source figures it has."""
    kind = data.get("kind", "vault")
    freshness = ("STALE: the published graph changed since (hash "
                 f"{data['published_hash'][:12]})" if data["is_stale"] else "fresh")
    label = f" ({registry.kind(kind).label})" if kind != "vault" else ""
    lines = [f"{data['vault']}{label}: snapshot {data['snapshot_id']} of "
             f"{data['generated_at'][:16]} UTC, {freshness}"
             f"{' (cached)' if data['cache_hit'] else ''}"]
    cross_source = data["figures"]["cross_source"]
    if kind == "vault":
        lines += _vault_summary(data) + _vault_sections(data, limit)
    elif not cross_source:
        lines.append("  no figures yet: nothing links this source with another one")
    for name, value in cross_source.items():
        lines += _figure_lines(name, value)
    return "\n".join(lines)
