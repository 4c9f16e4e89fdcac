"""Working stores that heal themselves from the tables.

The DuckDB tables are the source of truth; the vector store, the keyword index and the
embedded graph store are derived from them. Each is checked when the pipeline opens it: a
store that cannot be opened or fails its integrity check (Qdrant Edge segment files deleted,
so a facet finds "No appropriate index for faceting"; a Tantivy segment gone; a graph file
that is not a database) is deleted and rebuilt from the tables, and a store that lost a
source the published version holds (its folder removed by hand) gets that source back. A
warning names the store, the reason and what was rebuilt; vectors are re-embedded through
the embedding cache, so a rebuild costs little more than reading the cache.

A damaged DuckDB file cannot be rebuilt from anything but the sources, so it fails the
refresh with a message naming the file and what to do (``tables.TablesDamaged``)."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import duckdb

from jarvis_core.stores.chunk_rows import TableRows
from jarvis_core.stores.graph.elements import Edge, Node
from jarvis_core.stores.serving import NotPublished, current_version
from jarvis_core.stores.tables import Connect

if TYPE_CHECKING:
    from jarvis_core.stores.graph.sqlite import SqliteGraphStore
    from jarvis_core.stores.keyword import KeywordIndex
    from jarvis_core.stores.vectors.base import VectorStore

log = logging.getLogger(__name__)
Store = TypeVar("Store")
_MAX_REASON_CHARS = 200
def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_MAX_REASON_CHARS]


def _recoverable(exc: BaseException) -> bool:
    """An error a damaged store raises: any Exception, or a Rust panic (pyo3's
    PanicException derives from BaseException), never an interrupt."""
    return isinstance(exc, Exception) or type(exc).__name__ == "PanicException"


def published_counts(data_dir: Path, key: str, made_by: Mapping[str, str] | None = None
                     ) -> dict[str, int]:
    """Items per source the current serving version records under ``key`` ('vectors',
    'keyword'); empty when nothing is published, or when the version's manifest differs
    from ``made_by`` (another collection: a model change starts a new one empty)."""
    try:
        manifest = current_version(data_dir).manifest
    except (NotPublished, OSError, ValueError):
        return {}
    if any(manifest.get(name) != value for name, value in (made_by or {}).items()):
        return {}
    return {str(source): int(n) for source, n in (manifest.get(key) or {}).items()}


def table_counts(conn: duckdb.DuckDBPyConnection, sql: str) -> dict[str, int]:
    """``SELECT source, count(*) ... GROUP BY source`` as a dict."""
    return {source: count for source, count in conn.execute(sql).fetchall()}


def open_healed(what: str, where: Path | str, open_store: Callable[[], Store],
                check: Callable[[Store], Mapping[str, int]], drop: Callable[[], None] | None,
                expected: Callable[[], Mapping[str, int]],
                restore: Callable[[Store, Sequence[str]], None],
                damage: Callable[[BaseException], bool] = lambda exc: True,
                logger: logging.Logger = log) -> Store:
    """Open a store, healed if need be.

    ``check`` returns what the store holds per source and raises when it fails its
    integrity check; ``drop`` deletes its files (None: a server store, never dropped);
    ``expected`` gives, per source, how much the store should hold (a source expected but
    held nowhere is restored alone); ``restore`` rebuilds the named sources from the
    tables. ``damage`` tells a damaged store's errors from others (another process holding
    it, a store made for another model), which are raised as they are."""
    store, reason = None, None
    try:
        store = open_store()
        held = check(store)
    except BaseException as exc:
        if drop is None or not _recoverable(exc) or not damage(exc):
            _close(store)
            raise
        reason = f"failed its integrity check ({_reason(exc)})"
    if reason is not None:
        _close(store)
        drop()
        store = open_store()
    try:
        wanted = {source: count for source, count in expected().items() if count}
    except BaseException:
        _close(store)
        raise
    if reason is not None:
        sources = sorted(wanted)
    else:
        sources = sorted(source for source in wanted if not held.get(source))
        if not sources:
            return store
        reason = f"holds nothing of {', '.join(sources)}, which the tables have"
    logger.warning(f"{what} {where} {reason}: rebuilding it from the tables "
                   f"({', '.join(sources) or 'no sources'})")
    started = time.perf_counter()
    try:
        restore(store, sources)
    except BaseException:
        _close(store)
        raise
    logger.warning(f"{what} {where} rebuilt from the tables in "
                   f"{time.perf_counter() - started:.1f} s")
    return store


def _close(store: object) -> None:
    if store is not None:
        try:
            store.close()
        except Exception:  # noqa: BLE001 - a damaged store may fail to close too
            log.debug("closing a damaged store failed", exc_info=True)


def sqlite_damage(exc: BaseException) -> bool:
    """SQLite errors other than another connection holding the file."""
    return not (isinstance(exc, sqlite3.OperationalError)
                and any(word in str(exc) for word in ("locked", "busy")))


def remover(path: Path) -> Callable[[], None]:
    """Deletes a store's folder or file."""
    def remove() -> None:
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
            for suffix in ("-wal", "-shm", "-journal"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
    return remove


# -- per store checks ---------------------------------------------------------------------

def check_vectors(store: VectorStore) -> dict[str, int]:
    return store.check()


def check_keyword(index: KeywordIndex) -> dict[str, int]:
    """Chunks per source in the ledger, after opening both Tantivy indexes and comparing the
    chunk index's live documents with the ledger (a lost segment or folder differs)."""
    import tantivy

    from jarvis_core.stores.keyword import CHUNKS_DIR, NAMES_DIR

    held = index.counts()
    documents = tantivy.Index.open(str(index.directory / CHUNKS_DIR)).searcher().num_docs
    tantivy.Index.open(str(index.directory / NAMES_DIR)).searcher()
    if documents != sum(held.values()):
        raise ValueError(f"the chunk index holds {documents} documents, its ledger "
                         f"{sum(held.values())}")
    return held


def check_graph(store: SqliteGraphStore) -> dict[str, int]:
    return store.check()


# -- the three stores, healed from the tables --------------------------------------------

_CHUNKS_BY_SOURCE = "SELECT source, count(*) FROM chunks GROUP BY source"


def _published_and_stored(data_dir: Path, key: str, connect: Connect,
                          made_by: Mapping[str, str] | None = None) -> dict[str, int]:
    """Chunks per source, for the sources the published version has ``key`` items of."""
    published = published_counts(data_dir, key, made_by)
    if not any(published.values()):
        return {}
    with connect() as conn:
        chunks = table_counts(conn, _CHUNKS_BY_SOURCE)
    return {source: chunks[source] for source, count in published.items()
            if count and chunks.get(source)}


def open_vector_store(open_store: Callable[[], VectorStore], collection: str,
                      directory: Path | None, data_dir: Path, connect: Connect, embedder,
                      logger: logging.Logger = log) -> VectorStore:
    """The vector store, healed: a damaged Edge shard (``directory``; None for a server
    collection, never dropped) is rebuilt and a lost source re-embedded from its chunks
    (``embedder``: anything with ``embed(texts)``, the cached one making this cheap)."""
    from jarvis_core.stores.vectors.base import VectorStoreBusy, VectorStoreMismatch
    from jarvis_core.stores.vectors.sync import sync_source

    def restore(store: VectorStore, sources: Sequence[str]) -> None:
        for source in sources:
            sync_source(source, TableRows(connect, source), store.chunk_ids(source),
                        lambda: nullcontext(store), embedder)

    return open_healed(
        "vector store", directory or "(server collection)", open_store, check_vectors,
        remover(directory) if directory is not None else None,
        lambda: _published_and_stored(data_dir, "vectors", connect, {"collection": collection}),
        restore,
        lambda exc: not isinstance(exc, VectorStoreBusy | VectorStoreMismatch), logger)


def open_keyword_index(directory: Path, data_dir: Path, connect: Connect,
                       logger: logging.Logger = log) -> KeywordIndex:
    """The keyword index, healed: rebuilt from the chunks table when damaged, a lost source
    re-indexed."""
    from jarvis_core.stores.keyword import KeywordIndex

    def restore(index: KeywordIndex, sources: Sequence[str]) -> None:
        for source in sources:
            index.sync_source(source, TableRows(connect, source))

    return open_healed("keyword index", directory, lambda: KeywordIndex(directory),
                       check_keyword, remover(directory),
                       lambda: _published_and_stored(data_dir, "keyword", connect), restore,
                       sqlite_damage, logger)


def open_graph_store(path: Path, connect: Connect,
                     logger: logging.Logger = log) -> SqliteGraphStore:
    """The embedded graph store, healed: rebuilt from DuckDB's graph tables when damaged or
    when it holds nothing of a source the tables have."""
    from jarvis_core.stores.graph.base import DOCUMENT_TYPES_SQL
    from jarvis_core.stores.graph.sqlite import SqliteGraphStore

    def expected() -> dict[str, int]:
        with connect() as conn:
            return table_counts(conn, "SELECT source, count(*) FROM graph_nodes WHERE type IN "
                                      f"{DOCUMENT_TYPES_SQL} GROUP BY source")

    def restore(store: SqliteGraphStore, sources: Sequence[str]) -> None:
        with connect() as conn:
            nodes, edges = graph_from_tables(conn)
        store.apply(removed_origins=(), nodes=nodes, edges=edges)

    return open_healed("graph store", path, lambda: SqliteGraphStore(path), check_graph,
                       remover(path), expected, restore, sqlite_damage, logger)


def graph_from_tables(conn: duckdb.DuckDBPyConnection) -> tuple[list[Node], list[Edge]]:
    """Every node DuckDB's graph tables hold (one row per key, the latest seen) and every
    edge whose two ends are among them."""
    nodes = [Node(key, kind, title, node_source, json.loads(properties or "{}"))
             for key, kind, title, node_source, properties in conn.execute(
                 "SELECT node_key, arg_max(type, last_seen), arg_max(title, last_seen), "
                 "arg_max(node_source, last_seen), arg_max(properties, last_seen) "
                 "FROM graph_nodes GROUP BY node_key ORDER BY node_key").fetchall()]
    keys = {node.key for node in nodes}
    edges = [Edge(src, dst, relation, confidence, extractor, origin, source,
                  tuple(evidence or ()), evidence_text or "", 1.0 if weight is None else weight)
             for src, dst, relation, confidence, extractor, origin, source, evidence,
             evidence_text, weight in conn.execute(
                 "SELECT src, dst, relation, confidence, extractor, origin, source, evidence, "
                 "evidence_text, weight FROM graph_edges ORDER BY edge_key").fetchall()
             if src in keys and dst in keys]
    return nodes, edges
