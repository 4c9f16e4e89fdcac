"""Keyword search (search-vault): document names, or chunk content with a highlighted
preview, ranked by BM25 from the keyword index of the published serving version."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from jarvis_core.stores import serving
from jarvis_core.stores.keyword import KeywordSearcher
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.knowledge_base import (
    MAX_LIMIT,
    KnowledgeBase,
    QueryError,
    snippet,
    sql_strings,
)
from jarvis_query.snapshot import Snapshot

_KEEP_SEARCHERS = 2
_searchers: dict[Path, KeywordSearcher] = {}
_searchers_lock = threading.Lock()


def keyword_searcher(snapshot: Snapshot) -> KeywordSearcher:
    """The keyword index of ``snapshot``'s version, opened once per process (opening reads
    only index metadata; the files are memory-mapped). The previous version's stays open so
    requests in flight on it finish."""
    path = snapshot.version.keyword_path
    with _searchers_lock:
        if path not in _searchers:
            if not path.is_dir():
                raise serving.NotPublished(
                    f"serving version {snapshot.version.name} has no keyword index: run "
                    "`jarvis refresh` to publish one")
            _searchers[path] = KeywordSearcher(path)
            for old in list(_searchers)[:-_KEEP_SEARCHERS]:
                del _searchers[old]
        return _searchers[path]


def check_query(kb: KnowledgeBase, query: str, limit: int, vault: str | None) -> None:
    """The checks every search makes, with the messages of ``search_semantic``; ``vault``
    may name any configured source (a repository or ticket set too)."""
    if not isinstance(query, str) or not query.strip():
        raise QueryError("query parameter is required")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise QueryError(f"limit must be between 1 and {MAX_LIMIT}")
    if vault is not None and vault not in kb.config.source_names:
        raise QueryError(f"Unknown vault '{vault}'")


def search_vault(kb: KnowledgeBase, query: str, search_content: bool = False, limit: int = 10,
                 vault: str | None = None) -> list[dict]:
    """Without ``search_content``: documents whose title or path matches (``match`` "name",
    the snippet is the document's opening). With it: chunks whose text matches (``match``
    "content", the snippet shows the matched words in **bold**). Best BM25 score first."""
    check_query(kb, query, limit, vault)
    snapshot = kb.snapshots.current()
    searcher = keyword_searcher(snapshot)
    if search_content:
        hits = searcher.search(query, limit, VectorFilter(sources=[vault]) if vault else None,
                               snippets=True)
        previews = {hit.chunk_id: hit.snippet for hit in hits}
        results = KnowledgeBase._results(snapshot, [(hit.chunk_id, hit.score) for hit in hits])
        return [{**dataclasses.replace(result, snippet=previews[result.chunk_id]
                                       or result.snippet).as_dict(), "match": "content"}
                for result in results]
    names = searcher.search_names(query, limit, [vault] if vault else None)
    openings = _openings(snapshot, [name.doc_key for name in names])
    results = []
    for name in names:
        chunk_id, text = openings.get(name.doc_key, ("", ""))
        results.append({"path": name.path, "vault": name.source, "heading": "",
                        "score": round(name.score, 4), "snippet": snippet(text),
                        "title": name.title, "chunk_id": chunk_id,
                        "source_type": name.source_type, "match": "name"})
    return results


def _openings(snapshot: Snapshot, doc_keys: list[str]) -> dict[str, tuple[str, str]]:
    """doc key -> (chunk id, text) of each document's first chunk."""
    if not doc_keys:
        return {}
    rows = snapshot.cursor().execute(
        "SELECT doc_key, arg_min(chunk_id, position), arg_min(text, position) FROM chunks "
        f"WHERE doc_key IN ({sql_strings(doc_keys)}) GROUP BY doc_key").fetchall()
    return {doc_key: (chunk_id, text) for doc_key, chunk_id, text in rows}
