"""GraphRAG evidence packs (search-graphrag): search hits, widened and reranked through the
knowledge graph, packed into a context block for an assistant. No LLM is involved.

1. Hybrid search (BM25 + dense, RRF) finds the best chunks, led by the documents the query
   names (a ticket key, a commit hash...: jarvis_query/retrievers/identifiers.py); their
   documents, best first, are the hits and the first ``limit`` of them the seeds.
2. Each seed's graph neighbourhood (``depth`` hops) is read from the published graph.
   Candidates are the hit documents and the notes next to a seed (or within ``depth`` hops
   of two seeds): the notes the matches link to, and those that tie them together.
3. Candidates are reranked by a weighted sum. It started from the seed memory ranking's
   0.4 / 0.3 / 0.2 / 0.1; on the sample vault those let a well-linked cluster of weak
   matches outrank the one note that answers ("poached eggs recipe", depth 2, put the Lumen
   architecture notes above the shakshuka recipe), so relevance weighs more and proximity
   counts relevant seeds more:
   0.5 semantic relevance (the document's best fused score, min-max scaled over the hit
   documents, since RRF scores differ little in absolute terms; 0 for notes only the graph
   found), 0.25 graph proximity (1 / hops to each other seed, averaged with the seeds'
   relevance as weights), 0.15 centrality (log degree over the largest among the
   candidates), 0.1 recency (halving every 90 days behind the newest candidate, by the date
   its kind gives a document: a note's modification, a commit, a ticket's or page's last
   update, a thread's last message; 0 when the date is unknown). A document the query
   names stays first: the pack is about it.
4. The pack: ranked sources with their text (matched chunks first) and the edges that tie
   them to the other sources with the line each was read from; the subgraph linking the
   sources (with nodes such as tags that join two of them); and a context block cut to
   ``max_tokens`` tokens of the embedding model's tokenizer (an assistant's tokenizer
   differs by a few percent; the default budget leaves room for that).
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime
from functools import lru_cache

from jarvis_core.stores.graph.base import NOTE
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_core.text.tokens import TokenCounter, token_counter
from jarvis_query.fusion import min_max
from jarvis_query.results import sql_strings
from jarvis_query.retrievers.base import Retriever
from jarvis_query.retrievers.graph import GraphRetriever, Neighbourhoods
from jarvis_query.snapshot import Snapshot, graph_failures
from jarvis_query.symbols import symbol_node_key

WEIGHTS = {"semantic": 0.5, "graph": 0.25, "centrality": 0.15, "recency": 0.1}
HIT_CHUNKS = 50
RECENCY_HALF_LIFE_DAYS = 90
DEFAULT_MAX_TOKENS = 6500
CUT_MARK = " …\n"  # ends a block cut at the budget
CHUNKS_PER_SOURCE = 2


@lru_cache(maxsize=4)
def _counter(model: str) -> TokenCounter:
    return token_counter(model)


class GraphRAG:
    """Evidence packs from a chunk retriever (hybrid search) and the graph around its hits."""

    def __init__(self, search: Retriever, graph: GraphRetriever) -> None:
        self.search = search
        self.graph = graph

    def pack(self, snapshot: Snapshot, query: str, limit: int = 10,
             filters: VectorFilter | None = None, depth: int = 1,
             max_tokens: int = DEFAULT_MAX_TOKENS) -> dict:
        """An evidence pack for ``query``: ranked sources with score components, text and
        evidence; the subgraph linking them; a context block within ``max_tokens``. The
        search hits match ``filters``; so do the notes the graph adds (their source, and
        "note" among the source types when those are given)."""
        hits = self.search.retrieve(snapshot, query, HIT_CHUNKS, filters)
        chunks = _chunk_rows(snapshot, [hit.chunk_id for hit in hits])
        best_scores: dict[str, float] = {}
        matched: dict[str, list[str]] = defaultdict(list)
        for hit in hits:
            row = chunks.get(hit.chunk_id)
            if row is not None:
                best_scores.setdefault(row["doc_key"], hit.score)
                matched[row["doc_key"]].append(hit.chunk_id)
        relevance = min_max(list(best_scores.items()))
        named = list(dict.fromkeys(chunks[hit.chunk_id]["doc_key"] for hit in hits
                                   if hit.identifier and hit.chunk_id in chunks))
        seeds = list(relevance)[:limit]
        try:
            found, graph_message = self.graph.neighbourhoods(snapshot, seeds, depth), None
        except graph_failures() as exc:
            found = Neighbourhoods()
            graph_message = f"Graph search is currently unavailable: {exc}"

        near = {key for key, by_seed in found.distances.items()
                if found.nodes[key]["type"] == NOTE and key not in relevance
                and (min(by_seed.values()) == 1 or len(by_seed) >= 2)}
        if filters and filters.sources:
            near = {key for key in near if found.nodes[key]["source"] in filters.sources}
        if filters and filters.source_types is not None and NOTE not in filters.source_types:
            near = set()
        candidates = list(relevance) + sorted(near)
        degrees = _degrees(snapshot, candidates) if graph_message is None else {}
        documents = _documents(snapshot, candidates)
        scored = _rerank(candidates, relevance, seeds, found.distances, degrees, documents)
        chosen = list(dict.fromkeys(
            named + [key for key, _ in scored if key in documents]))[:limit]

        sources = _sources(snapshot, chosen, dict(scored), matched, chunks, documents, found)
        subgraph = _subgraph(chosen, found)
        context, tokens, truncated = _context_block(query, sources, subgraph,
                                                    _counter(snapshot.model), max_tokens)
        return {"query": query, "depth": depth, "weights": WEIGHTS,
                "graph_available": graph_message is None, "graph_message": graph_message,
                "sources": sources, "subgraph": subgraph, "context": context,
                "tokens": tokens, "max_tokens": max_tokens, "truncated": truncated}


def _chunk_rows(snapshot: Snapshot, chunk_ids: list[str]) -> dict[str, dict]:
    if not chunk_ids:
        return {}
    rows = snapshot.cursor().execute(
        "SELECT chunk_id, doc_key, heading_path, text FROM chunks "
        f"WHERE chunk_id IN ({sql_strings(chunk_ids)})").fetchall()
    return {r[0]: {"doc_key": r[1], "heading_path": r[2], "text": r[3]} for r in rows}


def _degrees(snapshot: Snapshot, keys: list[str]) -> dict[str, int]:
    """Distinct neighbours of each document's node (a code document's: its symbol's) over
    any relation, from the published graph_edges table (the graph's source of truth,
    whichever store serves it): one query."""
    if not keys:
        return {}
    nodes = {symbol_node_key(key): key for key in keys}
    listed = sql_strings(list(nodes))
    rows = snapshot.cursor().execute(f"""
        SELECT node, count(DISTINCT other) FROM (
            SELECT src AS node, dst AS other FROM graph_edges WHERE src IN ({listed})
            UNION ALL
            SELECT dst, src FROM graph_edges WHERE dst IN ({listed})) GROUP BY node
        """).fetchall()
    return {nodes[node]: count for node, count in rows}


# A version published before the documents table existed: no dates, recency counts 0.
_UNDATED = "SELECT NULL::VARCHAR AS source, NULL::VARCHAR AS doc_key, " \
           "NULL::TIMESTAMP AS modified_at WHERE false"


def _documents(snapshot: Snapshot, keys: list[str]) -> dict[str, dict]:
    """doc key -> vault, path, title, source type, modification time, for documents with
    chunks in the published tables (the time their kind gives: a note's, a commit's, a
    ticket's or page's last update, a thread's last message)."""
    if not keys:
        return {}
    dated = "documents" if "documents" in snapshot.table_names() else f"({_UNDATED})"
    rows = snapshot.cursor().execute(f"""
        SELECT c.doc_key, any_value(c.source), any_value(c.path), any_value(c.title),
               any_value(c.source_type), max(d.modified_at)
        FROM chunks c LEFT JOIN {dated} d ON d.source = c.source AND d.doc_key = c.doc_key
        WHERE c.doc_key IN ({sql_strings(keys)}) GROUP BY c.doc_key""").fetchall()
    return {r[0]: {"vault": r[1], "path": r[2], "title": r[3], "source_type": r[4],
                   "modified_at": r[5]} for r in rows}


def _rerank(candidates: list[str], relevance: dict[str, float], seeds: list[str],
            distances: dict[str, dict[str, int]], degrees: dict[str, int],
            documents: dict[str, dict]) -> list[tuple[str, dict]]:
    """(doc key, components with their weighted total) best first, ties by key."""
    top_degree = max([degrees.get(key, 0) for key in candidates] + [1])
    dates = [d["modified_at"] for d in documents.values() if d["modified_at"] is not None]
    newest: datetime | None = max(dates, default=None)
    scored = []
    for key in candidates:
        others = [seed for seed in seeds if seed != key]
        hops = distances.get(key, {})
        weight = sum(relevance[seed] for seed in others)
        proximity = sum(relevance[seed] / hops[seed] for seed in others if hops.get(seed)
                        ) / weight if weight else 0.0
        modified = documents.get(key, {}).get("modified_at")
        recency = 0.5 ** ((newest - modified).total_seconds() / 86400
                          / RECENCY_HALF_LIFE_DAYS) if modified is not None else 0.0
        components = {"semantic": relevance.get(key, 0.0), "graph": proximity,
                      "centrality": math.log1p(degrees.get(key, 0)) / math.log1p(top_degree),
                      "recency": recency}
        components = {name: round(value, 4) for name, value in components.items()}
        components["total"] = round(sum(WEIGHTS[n] * components[n] for n in WEIGHTS), 4)
        scored.append((key, components))
    return sorted(scored, key=lambda item: (-item[1]["total"], item[0]))


def _sources(snapshot: Snapshot, chosen: list[str], scores: dict[str, dict],
             matched: dict[str, list[str]], chunks: dict[str, dict],
             documents: dict[str, dict], found: Neighbourhoods) -> list[dict]:
    """The chosen documents with their text (matched chunks, else the opening chunks) and
    the edges tying each to another chosen document."""
    unmatched = [key for key in chosen if not matched.get(key)]
    openings: dict[str, list[tuple[str, list[str], str]]] = defaultdict(list)
    if unmatched:
        for doc_key, chunk_id, heading_path, text in snapshot.cursor().execute(
                "SELECT doc_key, chunk_id, heading_path, text FROM chunks "
                f"WHERE doc_key IN ({sql_strings(unmatched)}) ORDER BY doc_key, position"
        ).fetchall():
            if len(openings[doc_key]) < CHUNKS_PER_SOURCE:
                openings[doc_key].append((chunk_id, heading_path, text))
    chosen_set = set(chosen)
    sources = []
    for rank, key in enumerate(chosen, 1):
        parts = [(c, chunks[c]["heading_path"], chunks[c]["text"])
                 for c in matched.get(key, [])[:CHUNKS_PER_SOURCE]] or openings.get(key, [])
        evidence = [
            {"relation": edge["relation"],
             "direction": "out" if edge["src"] == key else "in",
             "other": edge["dst"] if edge["src"] == key else edge["src"],
             "other_title": found.nodes.get(
                 edge["dst"] if edge["src"] == key else edge["src"], {}).get("title"),
             "evidence_text": edge["evidence_text"], "chunk_ids": edge["evidence"]}
            for edge in found.edges.values()
            if key in (edge["src"], edge["dst"]) and {edge["src"], edge["dst"]} <= chosen_set
            and edge["src"] != edge["dst"]]
        document = documents[key]
        sources.append({
            "rank": rank, "key": key, "vault": document["vault"], "path": document["path"],
            "title": document["title"], "source_type": document["source_type"],
            "modified_at": document["modified_at"].isoformat()
            if document["modified_at"] else None,
            "score": scores[key]["total"],
            "components": {n: scores[key][n] for n in WEIGHTS},
            "found_by": "search" if matched.get(key) else "graph",
            "chunk_ids": [chunk_id for chunk_id, _, _ in parts],
            "headings": [" > ".join(heading_path or []) for _, heading_path, _ in parts],
            "text": "\n\n".join(text.strip() for _, _, text in parts),
            "evidence": sorted(evidence, key=lambda e: (e["relation"], e["other"])),
        })
    return sources


def _subgraph(chosen: list[str], found: Neighbourhoods) -> dict:
    """The chosen documents, the nodes adjacent to two of them (a shared tag, a note in
    between), and the edges among those."""
    chosen_set = set(chosen)
    touching: dict[str, set[str]] = defaultdict(set)
    for edge in found.edges.values():
        for end, other in ((edge["src"], edge["dst"]), (edge["dst"], edge["src"])):
            if other in chosen_set and end not in chosen_set:
                touching[end].add(other)
    members = chosen_set | {key for key, linked in touching.items() if len(linked) >= 2}
    kept_edges = sorted((e for e in found.edges.values()
                         if e["src"] in members and e["dst"] in members),
                        key=lambda e: (e["src"], e["relation"], e["dst"]))
    kept_nodes = [found.nodes.get(key, {"key": key, "type": NOTE, "title": key, "source": None})
                  | {"source_rank": chosen.index(key) + 1 if key in chosen_set else None}
                  for key in sorted(members)]
    return {"nodes": kept_nodes, "edges": kept_edges}


def _context_block(query: str, sources: list[dict], subgraph: dict, counter: TokenCounter,
                   max_tokens: int) -> tuple[str, int, bool]:
    """Sources in rank order, then the relationships, as long as they fit ``max_tokens``;
    a source that does not fit whole is cut at a token boundary. Returns (text, tokens,
    truncated)."""
    titles = {node["key"]: node["title"] for node in subgraph["nodes"]}
    header = f"Evidence for: {query}\n"
    blocks = [f"[{s['rank']}] {s['title']} ({s['vault']}/{s['path']}, score {s['score']})\n"
              f"{s['text']}\n" for s in sources]
    relations = [f"- {titles.get(e['src'], e['src'])} {e['relation']} "
                 f"{titles.get(e['dst'], e['dst'])}"
                 + (f": {e['evidence_text'].strip()}" if e["evidence_text"] else "")
                 for e in subgraph["edges"]]
    if relations:
        blocks.append("Relationships:\n" + "\n".join(relations) + "\n")
    # WordPiece splits at whitespace, so the tokens of blocks joined by newlines add up; the
    # model's two special tokens are counted once. Only as much of a block is tokenized as
    # the budget could take (the relationships alone can be five times the budget).
    text, used, truncated = header, counter.count([header])[0], False
    for block in blocks:
        spans = counter.leading_spans(block, max_tokens - used + 1)
        if used + len(spans) <= max_tokens:
            text, used = f"{text}\n{block}", used + len(spans)
            continue
        truncated = True
        room = max_tokens - used - 3  # the "…" that marks the cut
        if room > 20:
            text = f"{text}\n{block[:spans[room - 1][1]]}{CUT_MARK}"
            used += room + counter.count([CUT_MARK])[0] - 2
        break
    return text, used, truncated
