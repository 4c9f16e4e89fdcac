"""Keyword retrieval (BM25) from the Tantivy index of the published version: chunk text, with
or without highlighted previews, and document names, as hits (jarvis_query/results.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from jarvis_core.stores import serving
from jarvis_core.stores.keyword import KeywordSearcher
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.results import Hit
from jarvis_query.snapshot import Snapshot

_KEEP_SEARCHERS = 2  # the current version's and the one requests in flight may still use


class KeywordRetriever:
    def __init__(self) -> None:
        self._searchers: dict[Path, KeywordSearcher] = {}
        self._lock = threading.Lock()

    def open(self, snapshot: Snapshot) -> None:
        """Open the keyword index of ``snapshot``'s version now (health-status checks that it
        opens); its searches go through the methods below, which keep to the snapshot's
        sources."""
        self._searcher(snapshot)

    def _searcher(self, snapshot: Snapshot) -> KeywordSearcher:
        """The keyword index of ``snapshot``'s version, opened once (opening reads only
        index metadata; the files are memory-mapped)."""
        path = snapshot.version.keyword_path
        with self._lock:
            if path not in self._searchers:
                if not path.is_dir():
                    raise serving.NotPublished(
                        f"serving version {snapshot.version.name} has no keyword index: run "
                        "`jarvis refresh` to publish one")
                self._searchers[path] = KeywordSearcher(path)
                for old in list(self._searchers)[:-_KEEP_SEARCHERS]:
                    del self._searchers[old]
            return self._searchers[path]

    def retrieve(self, snapshot: Snapshot, query: str, limit: int,
                 filters: VectorFilter | None = None) -> list[Hit]:
        return [Hit.placed(hit.chunk_id, hit.score, hit.source, hit.doc_key, hit.heading)
                for hit in self._searcher(snapshot).search(query, limit,
                                                           snapshot.restrict(filters))]

    def content(self, snapshot: Snapshot, query: str, limit: int,
                filters: VectorFilter | None = None) -> list[Hit]:
        """Chunk hits (``match`` "content") whose snippet is a preview with the matched
        words in **bold**."""
        return [Hit(chunk_id=hit.chunk_id, score=hit.score, snippet=hit.snippet,
                    match="content", vault=hit.source, doc_key=hit.doc_key, heading=hit.heading)
                for hit in self._searcher(snapshot).search(query, limit,
                                                           snapshot.restrict(filters),
                                                           snippets=True)]

    def names(self, snapshot: Snapshot, query: str, limit: int,
              sources: list[str] | None = None) -> list[Hit]:
        """Document hits (``match`` "name", no chunk id) whose title or path matches, best
        first."""
        return [Hit(path=hit.path, vault=hit.source, score=hit.score, title=hit.title,
                    source_type=hit.source_type, match="name", doc_key=hit.doc_key)
                for hit in self._searcher(snapshot).search_names(
                    query, limit, snapshot.restrict_sources(sources))]
