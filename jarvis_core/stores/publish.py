"""Publishing a serving version: a consistent copy of the tables, vectors, graph and keyword
index, made visible to query processes atomically."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from jarvis_core.stores import serving
from jarvis_core.stores.connections import release_cache
from jarvis_core.stores.tables import Connect

if TYPE_CHECKING:
    from jarvis_core.stores.graph.sqlite import SqliteGraphStore
    from jarvis_core.stores.keyword import KeywordIndex
    from jarvis_core.stores.vectors.base import VectorStore


@dataclass(frozen=True)
class Publication:
    version: serving.PublishedVersion
    chunks: int
    vectors_by_source: dict[str, int]


def publish_version(connect: Connect,
                    data_dir: Path, tables: Mapping[str, str], vectors: VectorStore,
                    graph: SqliteGraphStore | None, keyword: KeywordIndex, graph_backend: str,
                    settings: dict[str, str], embedding: dict[str, str],
                    query_model: Path | None = None) -> Publication:
    """Copy every store into a staging version and commit it (``tables``: each published
    table and the query that fills it); a failure leaves nothing
    behind and the current version untouched. ``graph`` is None when the graph lives in a
    server (Neo4j), which readers query directly; so are vectors in a Qdrant server. The
    tables' connection (from ``connect``) is held only while they are copied. A version
    carries ``query_model`` (the exported encoder) when there is one, the fingerprints of the
    ``settings`` each source's layers were made with, the ``embedding`` backend chosen (with
    its precision and why: ``BackendChoice.as_dict``), and whether every chunk has its vector
    yet (a first refresh of a large source publishes before its embeddings are done)."""
    name, staging = serving.begin_version(data_dir)
    try:
        with connect() as conn:
            serving.copy_tables(conn, staging, tables, serving.SERVING_INDEXES)
            chunk_count, chunks_hash = conn.execute(
                "SELECT count(*), md5(coalesce(string_agg(chunk_id, ',' ORDER BY chunk_id), "
                "'')) FROM chunks").fetchone()
            release_cache(conn)  # before the vector index build, not beside it
        vector_counts = vectors.counts_by_source()
        if vectors.backend == "edge":
            vectors.publish_copy(staging / serving.VECTORS_DIR)
        if graph is not None:
            graph.publish_copy(staging / serving.GRAPH_FILE)
        keyword_counts = keyword.counts()
        keyword.publish_copy(staging / serving.KEYWORD_DIR)
        encoder = place_query_model(query_model, staging) if query_model else None
        version = serving.commit_version(data_dir, name, staging, {
            "model": vectors.model, "dimension": vectors.dimension,
            "vector_backend": vectors.backend,
            "collection": vectors.collection, "graph_backend": graph_backend,
            "chunks": chunk_count, "chunks_hash": chunks_hash, "vectors": vector_counts,
            "keyword": keyword_counts, "encoder": encoder, "settings": settings,
            "embedding": embedding,
            "vectors_complete": sum(vector_counts.values()) == chunk_count,
        })
    except BaseException:
        serving.abandon_version(staging)
        raise
    return Publication(version, chunk_count, vector_counts)


def place_query_model(exported: Path, version_dir: Path) -> str:
    """Hard-link (or copy, across file systems) the exported model into a version; the
    manifest's ``encoder`` entry."""
    target = version_dir / serving.ENCODER_DIR
    target.mkdir()
    for file in exported.iterdir():
        try:
            (target / file.name).hardlink_to(file)
        except OSError:
            shutil.copy2(file, target / file.name)
    return serving.ENCODER_DIR
