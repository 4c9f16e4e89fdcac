"""Keyword retrieval (BM25) from the Tantivy index of the published version: chunk text, with
or without highlighted previews, and document names."""

from __future__ import annotations

import threading
from pathlib import Path

from jarvis_core.stores import serving
from jarvis_core.stores.keyword import KeywordHit, KeywordSearcher, NameHit
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.retrievers.base import ScoredChunks
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
                 filters: VectorFilter | None = None) -> ScoredChunks:
        return [(hit.chunk_id, hit.score) for hit in
                self._searcher(snapshot).search(query, limit, snapshot.restrict(filters))]

    def with_previews(self, snapshot: Snapshot, query: str, limit: int,
                      filters: VectorFilter | None = None) -> list[KeywordHit]:
        """Chunk hits whose snippet shows the matched words in **bold**."""
        return self._searcher(snapshot).search(query, limit, snapshot.restrict(filters),
                                               snippets=True)

    def names(self, snapshot: Snapshot, query: str, limit: int,
              sources: list[str] | None = None) -> list[NameHit]:
        """Documents whose title or path matches, best first."""
        return self._searcher(snapshot).search_names(query, limit,
                                                     snapshot.restrict_sources(sources))
