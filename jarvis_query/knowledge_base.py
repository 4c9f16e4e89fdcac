"""The query API over the published stores, shared by the CLI and the MCP server.

One ``KnowledgeBase`` per serving process. It checks every argument (validation.py), then
composes the retrievers: dense, keyword, identifier and graph leaves, hybrid search over the
first two, and GraphRAG over hybrid search (led by the documents a query names) and the
graph. Semantic, keyword and hybrid search answer with one hit per document unless asked
for chunks (retrievers/grouping.py), and put the documents a query names first
(retrievers/identifiers.py). It follows new serving versions as they appear; each version's
query encoder and keyword index are loaded once.

A version published before its embeddings are done (a large first refresh) answers semantic
search with keyword results, and hybrid search and GraphRAG with their keyword leg, each
saying how far the embeddings are (``embeddings`` in the answer). A version whose tables
fail while a request reads them is passed over for the one before it, and the request is
answered from that one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import duckdb

from jarvis_core.config import JarvisConfig
from jarvis_core.stores import serving
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query import documents, symbols
from jarvis_query.context import NoSnapshot, VaultContexts
from jarvis_query.graphrag import DEFAULT_MAX_TOKENS, GraphRAG
from jarvis_query.lookup import DocumentNotFound, find_document
from jarvis_query.results import Hit, Hits, published
from jarvis_query.retrievers.dense import DenseRetriever
from jarvis_query.retrievers.graph import GraphRetriever
from jarvis_query.retrievers.grouping import (
    CHUNK,
    DOCUMENT,
    GROUPED_CANDIDATES,
    check_group,
    grouped,
)
from jarvis_query.retrievers.hybrid import HybridRetriever
from jarvis_query.retrievers.identifiers import IdentifierRetriever, IdentifiersFirst
from jarvis_query.retrievers.keyword import KeywordRetriever
from jarvis_query.snapshot import Snapshot, SnapshotProvider, graph_failures
from jarvis_query.status import list_sources
from jarvis_query.validation import (
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    QueryError,
    check_alpha,
    check_depth,
    check_max_tokens,
    check_search,
    check_similarity_threshold,
    require_text,
    search_filter,
    shown,
)

log = logging.getLogger("jarvis.query")
T = TypeVar("T")
NAME_CANDIDATES = 100  # names fetched before a source-type filter keeps ``limit`` of them


class KnowledgeBase:
    def __init__(self, config: JarvisConfig):
        self.config = config
        self.snapshots = SnapshotProvider(config)
        self.dense = DenseRetriever(config)
        self.keyword = KeywordRetriever()
        self.hybrid = HybridRetriever(self.keyword, self.dense)
        self.identifiers = IdentifierRetriever()
        self.graph = GraphRetriever()
        self.graphrag = GraphRAG(IdentifiersFirst(self.hybrid, self.identifiers), self.graph)
        self.vault_contexts = VaultContexts()

    def close(self) -> None:
        self.snapshots.close()

    def load(self) -> None:
        """Open the published version and load what its first semantic search needs (the
        query encoder, the vectors); nothing happens when nothing is published yet."""
        try:
            snapshot = self.snapshots.current()
            self.dense.encoder(snapshot.version)
            snapshot.vectors.load()
        except serving.NotPublished as exc:
            log.info("nothing to load yet: %s", exc)

    def load_in_background(self) -> threading.Thread:
        """``load`` on a thread of its own: requests that need it wait for it (they take the
        same locks), the others are answered meanwhile."""
        thread = threading.Thread(target=self._load_logging_failures, name="jarvis-load",
                                  daemon=True)
        thread.start()
        return thread

    def _load_logging_failures(self) -> None:
        try:
            self.load()
        except Exception:  # the tools report the same problem when they are called
            log.exception("loading the published version failed")

    def _optional_snapshot(self) -> Snapshot | None:
        try:
            return self.snapshots.current()
        except serving.NotPublished:
            return None

    def _read(self, work: Callable[[Snapshot], T]) -> T:
        """``work`` on the current snapshot; when its tables turn out damaged on the way, once
        more on the version before it."""
        snapshot = self.snapshots.current()
        try:
            return work(snapshot)
        except duckdb.Error as exc:
            from jarvis_core.stores.connections import is_damage  # imports polars: only on failure

            if not is_damage(exc):
                raise
            self.snapshots.damaged(snapshot, exc)
        return work(self.snapshots.current())

    def _ranked(self, snapshot: Snapshot, query: str, hits: list[Hit], limit: int,
                filters: VectorFilter | None, group: str) -> list[Hit]:
        """``hits`` (best first) led by the documents the query names: the best ``limit``,
        published."""
        hits = self.identifiers.first(snapshot, query, hits, filters, group)
        return published(snapshot, hits[:limit])

    def _fetched(self, snapshot: Snapshot, fetch: Callable[[int], list[Hit]], limit: int,
                 group: str) -> list[Hit]:
        """``fetch``'s (n -> the best n chunks) ``limit`` chunks, or documents."""
        return fetch(limit) if group == CHUNK else grouped(snapshot, fetch, limit)

    def search_semantic(self, query: str, limit: int = 10, vault: str | None = None,
                        similarity_threshold: float | None = None,
                        group: str = DOCUMENT) -> Hits:
        """Documents (``group="chunk"``: chunks) nearest in meaning to ``query``, best
        first, led by the documents it names; ``vault`` may name any configured source.
        While the version's embeddings are incomplete: keyword hits."""
        check_search(self.config, query, limit, vault)
        check_similarity_threshold(similarity_threshold)
        check_group(group)
        filters = VectorFilter(sources=[vault]) if vault else None

        def search(snapshot: Snapshot) -> Hits:
            if not snapshot.embeddings["complete"]:
                def fetch(count: int) -> list[Hit]:
                    return self.keyword.retrieve(snapshot, query, count, filters)
            else:
                def fetch(count: int) -> list[Hit]:
                    return self.dense.retrieve(snapshot, query, count, filters,
                                               score_threshold=similarity_threshold)
            hits = self._fetched(snapshot, fetch, limit, group)
            return Hits(self._ranked(snapshot, query, hits, limit, filters, group),
                        snapshot.embeddings)

        return self._read(search)

    def search_vault(self, query: str, search_content: bool = False, limit: int = 10,
                     vault: str | None = None, source_types: list[str] | None = None,
                     group: str = DOCUMENT) -> Hits:
        """Keyword search (BM25), led by the documents the query names. Without
        ``search_content``: documents whose title or path matches (``match`` "name", the
        snippet is the document's opening). With it: documents (``group="chunk"``: chunks)
        whose text matches (``match`` "content", the matched words in **bold**)."""
        check_search(self.config, query, limit, vault)
        check_group(group)
        filters = search_filter(vault, source_types)

        def search(snapshot: Snapshot) -> Hits:
            if search_content:
                hits = self._fetched(snapshot, lambda count: self.keyword.content(
                    snapshot, query, count, filters), limit, group)
            else:
                hits = self._names(snapshot, query, limit, filters)
            return Hits(self._ranked(snapshot, query, hits, limit, filters, group))

        return self._read(search)

    def _names(self, snapshot: Snapshot, query: str, limit: int,
               filters: VectorFilter | None) -> list[Hit]:
        """Documents whose title or path matches, of the filters' source types."""
        types = filters.source_types if filters else None
        names = self.keyword.names(snapshot, query, NAME_CANDIDATES if types else limit,
                                   filters.sources if filters else None)
        return [name for name in names if types is None or name.source_type in types][:limit]

    def search_hybrid(self, query: str, limit: int = 10, vault: str | None = None,
                      alpha: float | None = None, source_types: list[str] | None = None,
                      tags: list[str] | None = None, modified_after: str | None = None,
                      modified_before: str | None = None, group: str = DOCUMENT) -> Hits:
        """Keyword and semantic hits fused: RRF, or ``alpha`` (0 keyword .. 1 vector), with
        the filters on both legs, over documents (``group="chunk"``: chunks), led by the
        documents the query names; each hit says its rank and score in either leg (None
        where that leg did not find it). While the version's embeddings are incomplete, the
        keyword leg alone."""
        check_search(self.config, query, limit, vault)
        check_alpha(alpha)
        check_group(group)
        filters = search_filter(vault, source_types, tags, modified_after, modified_before)
        return self._read(lambda snapshot: Hits(self._fused(
            snapshot, query, limit, filters, alpha, group), snapshot.embeddings))

    def _fused(self, snapshot: Snapshot, query: str, limit: int, filters: VectorFilter | None,
               alpha: float | None, group: str) -> list[Hit]:
        """Hybrid search's best ``limit`` hits, led by the documents the query names."""
        # every fused document, so that a named one is shown by its best chunk
        fused = limit if group == CHUNK else GROUPED_CANDIDATES
        return self._ranked(snapshot, query, self.hybrid.retrieve(
            snapshot, query, fused, filters, alpha, group=group), limit, filters, group)

    def search_code(self, query: str, limit: int = 10, repo: str | None = None) -> dict:
        """Hybrid search over the code documents only (one per symbol), led by the symbols
        the query names; each hit with its symbol's file, line span, kind, qualified name and
        signature (jarvis_query/symbols.py)."""
        symbols.check_repository(self.config, repo)
        check_search(self.config, query, limit, None)
        filters = search_filter(repo, [symbols.CODE])

        def search(snapshot: Snapshot) -> dict:
            hits = self._fused(snapshot, query, limit, filters, None, DOCUMENT)
            return Hits(symbols.located(snapshot, hits), snapshot.embeddings).answer(query)

        return self._read(search)

    def get_symbol(self, name: str, repo: str | None = None) -> dict:
        """The symbols ``name`` names (a bare or qualified name, ``path:line``, a symbol
        key) in ``repo`` (every repository when None); when it names one, its definition and
        code, callers and callees, base and derived types and story (jarvis_query/symbols.py)."""
        require_text(name, "name", MAX_PATH_CHARS)
        symbols.check_repository(self.config, repo)
        return self._read(lambda snapshot: symbols.symbol_answer(self.config, snapshot, name,
                                                                 repo))

    def search_graph(self, query_note_path: str, depth: int = 1) -> dict:
        """The neighbourhood of a note (or of a ticket by key, a commit by hash, a thread or
        a page by key, a symbol by name, key or path:line): connected notes with tags,
        relationships by type, counts. When the graph cannot be searched, says why and falls
        back to semantic search (hits)."""
        require_text(query_note_path, "query_note_path", MAX_PATH_CHARS)
        check_depth(depth)
        snapshot = self.snapshots.current()
        try:
            found = find_document(self.config, snapshot, query_note_path)
            key, source, path = symbols.symbol_node_key(found.key), found.source, found.path
        except DocumentNotFound as missing:
            symbol = symbols.symbol_start(self.config, snapshot, query_note_path, missing)
            key, source, path = symbol.key, symbol.source, symbol.document
        try:
            result = self.graph.search(snapshot, key, depth)
        except graph_failures() as exc:
            title = path.rsplit("/", 1)[-1].removesuffix(".md")
            fallback = self.search_semantic(title, vault=source)
            return {"available": False,
                    "message": f"Graph search is currently unavailable: {exc}",
                    "fallback": fallback, "embeddings": fallback.embeddings}
        return {"available": True, "vault": source, "path": path, **result}

    def search_graphrag(self, query: str, limit: int = 10, vault: str | None = None,
                        depth: int = 1, max_tokens: int = DEFAULT_MAX_TOKENS,
                        source_types: list[str] | None = None) -> dict:
        """An evidence pack: hybrid hits reranked through the graph, the subgraph linking
        them and a context block within ``max_tokens`` (jarvis_query/graphrag.py)."""
        check_search(self.config, query, limit, vault)
        check_depth(depth)
        check_max_tokens(max_tokens)
        filters = search_filter(vault, source_types)
        return self._read(lambda snapshot: {
            **self.graphrag.pack(snapshot, query, limit=limit, filters=filters, depth=depth,
                                 max_tokens=max_tokens),
            "embeddings": snapshot.embeddings})

    def get_vault_context(self, vault: str) -> dict:
        """The source's newest analytics snapshot with ``generated_at``, ``content_hash``,
        ``is_stale`` (against the published graph), ``cache_hit`` and the source's ``kind``
        (a repository's or ticket set's snapshot has only cross-source figures)."""
        require_text(vault, "vault", MAX_NAME_CHARS)
        if vault not in self.config.source_names:
            raise QueryError(f"Unknown vault '{shown(vault)}'", "vault")
        try:
            answer = self._read(lambda snapshot: self.vault_contexts.get(snapshot, vault))
        except NoSnapshot as exc:
            raise QueryError(str(exc)) from exc
        return {**answer, "kind": self.config.source_kind(vault)}

    def read_note(self, path: str, vault: str | None = None) -> dict:
        """Any document by a search hit's path and vault, or by its key or identifier: a
        note as it is on disk, any other kind as it was indexed, with its details, links
        and backlinks (documents.py)."""
        return documents.read_document(self.config, self._optional_snapshot(), path, vault)

    def list_vaults(self) -> dict:
        """The configured sources of every kind and what the published version holds for
        each."""
        try:
            return self._read(lambda snapshot: list_sources(self.config, snapshot))
        except serving.NotPublished:  # none, or none readable: the configuration still lists
            return list_sources(self.config, None)

