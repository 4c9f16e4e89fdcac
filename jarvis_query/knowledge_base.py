"""The query API over the published stores, shared by the CLI and the MCP server.

One ``KnowledgeBase`` per serving process: it loads the embedding model once (the model
the published vectors were made with) and follows new serving versions as they appear.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

from neo4j.exceptions import DriverError, Neo4jError

from jarvis_core.config import JarvisConfig
from jarvis_core.stores.graph.search import graph_search
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.context import NoSnapshot, VaultContexts
from jarvis_query.snapshot import GraphUnavailable, Snapshot, SnapshotProvider

MAX_LIMIT = 50
SNIPPET_CHARS = 300
MIN_DEPTH, MAX_DEPTH = 1, 3


class QueryError(ValueError):
    """A bad argument; the message is meant for the person or assistant who sent it."""


@dataclass(frozen=True)
class SearchResult:
    path: str
    vault: str
    heading: str
    score: float
    snippet: str
    title: str
    chunk_id: str
    source_type: str

    def as_dict(self) -> dict:
        return asdict(self)


def sql_strings(values: list[str]) -> str:
    """Strings as a list of SQL literals for an IN list (quotes doubled, the SQL escape).
    Inlined rather than bound: DuckDB's Python binding tries ``import pandas`` for every
    bound parameter, and without pandas each failed import rescans sys.path (~1 ms); an IN
    list of literals also uses the chunk_id index (10 ids: 8.4 ms bound, 1.0 ms inlined)."""
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The start of a chunk on one line, cut at a word boundary."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[:limit].rsplit(" ", 1)[0] + " …"


class KnowledgeBase:
    def __init__(self, config: JarvisConfig):
        self.config = config
        self.snapshots = SnapshotProvider(config)
        self._embedders: dict[str, object] = {}
        self._embedder_lock = threading.Lock()
        self.vault_contexts = VaultContexts()

    def close(self) -> None:
        self.snapshots.close()

    def embedder(self, model: str):
        """The model the published vectors were made with, loaded once per process."""
        with self._embedder_lock:
            if model not in self._embedders:
                from jarvis_core.text.embedder import Embedder

                settings = self.config.embedding
                self._embedders[model] = Embedder(model, device=settings.device,
                                                  batch_size=settings.batch_size,
                                                  backend=settings.backend,
                                                  cache_dir=self.config.cache_dir)
            return self._embedders[model]

    def embed_query(self, model: str, query: str):
        """One query at a time: the model's tokenizer is not safe to share across threads."""
        embedder = self.embedder(model)
        with self._embedder_lock:
            return embedder.embed_query(query)

    def check_vault(self, vault: str | None) -> None:
        if vault is not None and vault not in self.config.vaults:
            raise QueryError(f"Unknown vault '{vault}'")

    def check_source(self, source: str | None) -> None:
        """Searches filter by any configured source: a vault, a repository or a ticket set."""
        if source is not None and source not in self.config.source_names:
            raise QueryError(f"Unknown vault '{source}'")

    def get_vault_context(self, vault: str) -> dict:
        """The vault's newest analytics snapshot with ``generated_at``, ``content_hash``,
        ``is_stale`` (against the published graph) and ``cache_hit``; see jarvis_query.context.
        Any configured source is accepted (a repository's snapshot has its own figures)."""
        if not vault or vault not in self.config.source_names:
            raise QueryError(f"Unknown vault '{vault}'")
        try:
            return self.vault_contexts.get(self.snapshots.current(), vault)
        except NoSnapshot as exc:
            raise QueryError(str(exc)) from exc

    def search_semantic(self, query: str, limit: int = 10, vault: str | None = None,
                        similarity_threshold: float | None = None) -> list[SearchResult]:
        """Chunks nearest in meaning to ``query``, best first; ``vault`` may name any
        configured source."""
        if not query or not query.strip():
            raise QueryError("query parameter is required")
        if not 1 <= limit <= MAX_LIMIT:
            raise QueryError(f"limit must be between 1 and {MAX_LIMIT}")
        if similarity_threshold is not None and not -1 <= similarity_threshold <= 1:
            raise QueryError("similarity_threshold must be between -1 and 1")
        self.check_source(vault)
        snapshot = self.snapshots.current()
        vector = self.embed_query(snapshot.model, query)
        hits = snapshot.vectors.search(
            vector, limit=limit,
            filters=VectorFilter(sources=[vault]) if vault else None,
            score_threshold=similarity_threshold)
        return self._results(snapshot, [(hit.chunk_id, hit.score) for hit in hits])

    def find_note(self, snapshot: Snapshot, note: str) -> tuple[str, str, str]:
        """(note key, vault, path) for a vault-relative path (".md" optional, a vault name
        may lead it) or a title; QueryError when it names no note or several."""
        wanted = note.strip().strip("/")
        vault, _, rest = wanted.partition("/")
        candidates = {wanted, wanted + ".md"}
        if vault in self.config.vaults and rest:
            candidates |= {rest, rest + ".md"}
        rows = snapshot.cursor().execute(
            "SELECT note_key, source, path FROM notes "
            f"WHERE path IN ({sql_strings(sorted(candidates))}) "
            "OR lower(title) = lower(?) ORDER BY source, path", [wanted]).fetchall()
        if vault in self.config.vaults and rest:
            rows = [row for row in rows if row[1] == vault] or rows
        if not rows:
            raise QueryError(f"Note not found: '{note}'")
        if len(rows) > 1:
            places = ", ".join(f"{source}/{path}" for _, source, path in rows)
            raise QueryError(f"'{note}' names several notes: {places}; give the path")
        return rows[0]

    def find_document(self, snapshot: Snapshot, name: str) -> tuple[str, str, str]:
        """(node key, source, path) of a note (as ``find_note``), else of a ticket by key
        ('LUM-4', 'lumen#7') or a commit by a hash prefix of at least 7 digits."""
        try:
            return self.find_note(snapshot, name)
        except QueryError as missing:
            wanted = name.strip()
            rows = snapshot.cursor().execute(
                "SELECT node_key, source, coalesce(json_extract_string(properties, '$.path'), "
                "'commits/' || json_extract_string(properties, '$.sha')) FROM graph_nodes "
                "WHERE (type = 'ticket' AND lower(node_key) = lower('ticket:' || $1)) "
                "OR (type = 'commit' AND length($1) >= 7 "
                "AND starts_with(json_extract_string(properties, '$.sha'), lower($1))) "
                "ORDER BY node_key", [wanted]).fetchall()
            if len(rows) > 1:
                raise QueryError(f"'{name}' names several commits or tickets: "
                                 + ", ".join(key for key, _, _ in rows)) from None
            if not rows:
                raise missing
            return rows[0]

    def search_graph(self, query_note_path: str, depth: int = 1) -> dict:
        """The neighbourhood of a note (or of a ticket by key, a commit by hash): connected
        notes with tags, relationships by type, counts. When the graph cannot be searched,
        says why and falls back to semantic search."""
        if not query_note_path or not query_note_path.strip():
            raise QueryError("query_note_path parameter is required")
        if isinstance(depth, bool) or not isinstance(depth, int) \
                or not MIN_DEPTH <= depth <= MAX_DEPTH:
            raise QueryError(f"depth must be between {MIN_DEPTH} and {MAX_DEPTH}")
        snapshot = self.snapshots.current()
        key, vault, path = self.find_document(snapshot, query_note_path)
        try:
            result = graph_search(snapshot.graph(), key, depth)
        except (GraphUnavailable, OSError, DriverError, Neo4jError) as exc:
            title = path.rsplit("/", 1)[-1].removesuffix(".md")
            return {"available": False,
                    "message": f"Graph search is currently unavailable: {exc}",
                    "fallback": [r.as_dict() for r in self.search_semantic(title, vault=vault)]}
        return {"available": True, "vault": vault, "path": path, **result}

    def search_vault(self, query: str, search_content: bool = False, limit: int = 10,
                     vault: str | None = None) -> list[dict]:
        """Keyword search (BM25): note names and paths, or with ``search_content`` chunk text
        with a highlighted preview (jarvis_query/keyword.py)."""
        from jarvis_query.keyword import search_vault

        return search_vault(self, query, search_content=search_content, limit=limit,
                            vault=vault)

    def search_hybrid(self, query: str, limit: int = 10, vault: str | None = None,
                      alpha: float | None = None, source_types: list[str] | None = None,
                      tags: list[str] | None = None, modified_after: str | None = None,
                      modified_before: str | None = None) -> list[dict]:
        """Keyword and semantic results fused: RRF, or ``alpha`` (0 keyword .. 1 vector),
        with filters on both legs (jarvis_query/hybrid.py)."""
        from jarvis_query.hybrid import search_hybrid

        return search_hybrid(self, query, limit=limit, vault=vault, alpha=alpha,
                             source_types=source_types, tags=tags,
                             modified_after=modified_after, modified_before=modified_before)

    def search_graphrag(self, query: str, limit: int = 10, vault: str | None = None,
                        depth: int = 1, max_tokens: int = 6500) -> dict:
        """An evidence pack: hybrid hits reranked through the graph, the subgraph linking
        them and a context block within ``max_tokens`` (jarvis_query/graphrag.py)."""
        from jarvis_query.graphrag import search_graphrag

        return search_graphrag(self, query, limit=limit, vault=vault, depth=depth,
                               max_tokens=max_tokens)

    @staticmethod
    def _results(snapshot: Snapshot, scored: list[tuple[str, float]]) -> list[SearchResult]:
        """Join scored chunk ids with the snapshot's chunk rows, keeping the given order."""
        if not scored:
            return []
        ids = [chunk_id for chunk_id, _ in scored]
        rows = snapshot.cursor().execute(
            "SELECT chunk_id, path, source, heading_path, text, title, source_type FROM chunks "
            f"WHERE chunk_id IN ({sql_strings(ids)})").fetchall()
        by_id = {row[0]: row for row in rows}
        results = []
        for chunk_id, score in scored:
            row = by_id.get(chunk_id)
            if row is None:  # a vector newer than the published tables (server mode only)
                continue
            _, path, source, heading_path, text, title, source_type = row
            results.append(SearchResult(
                path=path, vault=source, heading=heading_path[-1] if heading_path else "",
                score=round(float(score), 4), snippet=snippet(text), title=title,
                chunk_id=chunk_id, source_type=source_type))
        return results
