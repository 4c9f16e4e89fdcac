"""Keeping a vector collection equal to the chunks table, embedding only what is missing.

The collection belongs to one model (its name encodes model and dimension), so "has a
vector" means "has a vector from the current model", and a model change starts from an
empty collection instead of mixing vectors.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import duckdb
import numpy as np
import polars as pl

from jarvis_core import progress
from jarvis_core.stores.vectors.base import VectorPoint, VectorStore, embedding_text

# The chunk columns a vector carries, with its document's tags (a note's tags, a ticket's or
# page's labels) and modification time from the ``documents`` table every kind fills.
PAYLOAD_SQL = """
    SELECT c.chunk_id, c.source, c.source_type, c.doc_key, c.path, c.title,
           c.heading_path, c.context, c.text,
           coalesce(d.tags, []::VARCHAR[]) AS tags, d.modified_at
    FROM chunks c
    LEFT JOIN documents d ON d.source = c.source AND d.doc_key = c.doc_key
    WHERE c.source = $1
"""


def read_payload_rows(conn: duckdb.DuckDBPyConnection, source: str) -> pl.DataFrame:
    """A source's chunks with everything their vectors and keyword entries carry."""
    return conn.execute(PAYLOAD_SQL, [source]).pl()


class TextEmbedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class SyncReport:
    embedded: int
    reused: int
    deleted: int
    embed_seconds: float

    @property
    def chunks_per_second(self) -> float:
        return round(self.embedded / self.embed_seconds, 1) if self.embed_seconds else 0.0


def payload(row: dict) -> dict:
    """What a search hit needs without a table lookup, and every field it is filtered on."""
    modified = row["modified_at"]
    return {
        "chunk_id": row["chunk_id"], "source": row["source"],
        "source_type": row["source_type"], "doc_key": row["doc_key"], "path": row["path"],
        "title": row["title"], "heading": (row["heading_path"] or [""])[-1],
        "heading_path": list(row["heading_path"] or []), "tags": list(row["tags"] or []),
        "modified_at": modified.replace(tzinfo=UTC).isoformat()
        if isinstance(modified, datetime) else None,
    }


def sync_source(source: str, chunks: pl.DataFrame, store: VectorStore, embedder: TextEmbedder,
                batch_size: int = 256) -> SyncReport:
    """Embed the chunks of ``source`` that have no vector, delete vectors of vanished chunks.

    Vectors are written batch by batch as they are made, so a run that is killed keeps what
    it embedded and the next one embeds only the rest; progress is reported per batch."""
    stored = store.chunk_ids(source)
    current = set(chunks["chunk_id"].to_list())
    missing = chunks.filter(~pl.col("chunk_id").is_in(list(stored)))
    vanished = stored - current
    if vanished:
        store.delete(sorted(vanished))
    spent, done = 0.0, 0
    progress.report(source, "embeddings", 0, missing.height)
    for batch in missing.iter_slices(batch_size):
        rows = batch.to_dicts()
        started = time.perf_counter()
        vectors = embedder.embed([embedding_text(r["context"], r["text"]) for r in rows])
        spent += time.perf_counter() - started
        store.upsert([VectorPoint(r["chunk_id"], vector, payload(r))
                      for r, vector in zip(rows, vectors, strict=True)])
        done += len(rows)
        progress.report(source, "embeddings", done, missing.height)
    return SyncReport(embedded=missing.height, reused=len(current & stored),
                      deleted=len(vanished), embed_seconds=spent)
