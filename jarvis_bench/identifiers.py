"""``jarvis bench identifiers``: does a search for an item's identifier find that item first?

Over the published version of the configured sources, every ticket key (a Jira key written
upper case, as Jira writes it), commit hash prefix (7 digits, git's short hash), Message-ID
(in angle brackets, as mail headers write it) and Confluence page id becomes a query, asked
of keyword search (names, the default, and content), semantic search and hybrid search
through ``KnowledgeBase``. For each it reports the share of queries whose first hit is the
document named (goal 1.0) and the warm latency (goal p50 ≤ 50 ms), with the first misses,
and how far the version's embeddings are (semantic and hybrid search answer with keyword
hits while they are incomplete).
The identifiers are read from the ``documents`` table (every document's lower-cased names),
so the bench measures whatever sources the configuration holds.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable

from jarvis_bench.search import WARMUP, _percentiles
from jarvis_core.config import JarvisConfig
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.results import Hit, sql_strings

GOAL_FIRST = 1.0
GOAL_P50_MS = 50
SHOWN_MISSES = 10
HASH_PREFIX = 7
_JIRA_KEY = re.compile(r"[a-z][a-z0-9_]*-\d+")
_PAGE_ID = re.compile(r"\d+")
# source type -> how its names become queries (None: a name that is no identifier)
_QUERIES: dict[str, Callable[[str], str | None]] = {
    "ticket": lambda name: name.upper() if _JIRA_KEY.fullmatch(name) else name,
    "commit": lambda name: name[:HASH_PREFIX],
    "email": lambda name: f"<{name}>",
    "page": lambda name: name if _PAGE_ID.fullmatch(name) else None,
}


def identifier_queries(kb: KnowledgeBase) -> list[tuple[str, str, tuple[str, str]]]:
    """(source type, query, (source, doc key) of the document it names) for every
    identifier of the published documents, by source type, source and name."""
    rows = kb.snapshots.current().cursor().execute(
        "SELECT source_type, source, doc_key, names FROM documents "
        f"WHERE source_type IN ({sql_strings(list(_QUERIES))}) "
        "ORDER BY source_type, source, doc_key").fetchall()
    queries = []
    for source_type, source, doc_key, names in rows:
        for name in names:
            if (query := _QUERIES[source_type](name)) is not None:
                queries.append((source_type, query, (source, doc_key)))
    return queries


def _searches(kb: KnowledgeBase) -> dict[str, Callable[[str], list[Hit]]]:
    return {"keyword": kb.search_vault,
            "keyword_content": lambda query: kb.search_vault(query, search_content=True),
            "semantic": kb.search_semantic,
            "hybrid": kb.search_hybrid}


def _measure(search: Callable[[str], list[Hit]],
             queries: list[tuple[str, str, tuple[str, str]]]) -> dict:
    for _, query, _ in queries[:WARMUP]:
        search(query)
    timings, misses, first = [], [], 0
    for source_type, query, named in queries:
        started = time.perf_counter()
        hits = search(query)
        timings.append(time.perf_counter() - started)
        top = (hits[0].vault, hits[0].doc_key) if hits else None
        if top == named:
            first += 1
        elif len(misses) < SHOWN_MISSES:
            misses.append({"type": source_type, "query": query, "wanted": "/".join(named),
                           "first": "/".join(top) if top else None})
    return {"first": round(first / len(queries), 4), "found_first": first,
            **_percentiles(timings), "misses": misses}


def run_identifier_benchmark(config: JarvisConfig) -> dict:
    kb = KnowledgeBase(config)
    try:
        snapshot = kb.snapshots.current()
        queries = identifier_queries(kb)
        modes = ({name: _measure(search, queries) for name, search in _searches(kb).items()}
                 if queries else {})
        return {"version": snapshot.version.name, "embeddings": snapshot.embeddings,
                "queries": len(queries),
                "identifiers": dict(Counter(source_type for source_type, _, _ in queries)),
                "goal_first": GOAL_FIRST, "goal_p50_ms": GOAL_P50_MS, "modes": modes}
    finally:
        kb.close()
