"""Keeping a vector collection equal to the chunks table, embedding only what is missing.

The collection belongs to one model (its name encodes model and dimension), so "has a
vector" means "has a vector from the current model", and a model change starts from an
empty collection instead of mixing vectors.

Embedding runs with no store held: the chunks are read in bounded pages (one short tables
connection each) and their vectors written in batches of WRITE_BATCH, each batch in one
write turn of the store (``open_store`` opens it and takes the turn), so runs of other
sources write between them. Opening an Edge shard costs 0.4-0.55 s at 50k vectors and
0.7-0.8 s at 100k (measured on 2 cores); 4,096 vectors take about 50 s to embed there, so
opening stays near 1-2% of the time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from jarvis_core import progress
from jarvis_core.stores.chunk_rows import ChunkRows
from jarvis_core.stores.places import heading
from jarvis_core.stores.vectors.base import VectorPoint, VectorStore, embedding_text

WRITE_BATCH = 4096  # vectors written per turn of the store


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
        "title": row["title"], "heading": heading(row["heading_path"]),
        "heading_path": list(row["heading_path"] or []), "tags": list(row["tags"] or []),
        "modified_at": modified.replace(tzinfo=UTC).isoformat()
        if isinstance(modified, datetime) else None,
    }


def sync_source(source: str, chunks: ChunkRows, stored: set[str],
                open_store: Callable[[], AbstractContextManager[VectorStore]],
                embedder: TextEmbedder, batch_size: int = 256,
                write_batch: int = WRITE_BATCH) -> SyncReport:
    """Embed the chunks of ``source`` that have no vector (``stored``: the ids the store
    holds for it), delete vectors of vanished chunks (in the first write turn).

    The first embedded batch is written at once, with the deletes (a store that cannot be
    written fails the run before the long part), then every ``write_batch`` vectors, so a
    run that is killed keeps what it wrote and the next one embeds only the rest (the
    embedding cache keeps the others); progress is reported per embedded batch, once it
    is in hand or written."""
    current = chunks.ids()
    missing, vanished = current - stored, sorted(stored - current)
    spent, done, pending, unwritten_deletes = 0.0, 0, [], vanished

    def write() -> None:
        nonlocal pending, unwritten_deletes
        with open_store() as store:
            if unwritten_deletes:
                store.delete(unwritten_deletes)
            if pending:
                store.upsert(pending)
        pending, unwritten_deletes = [], []

    progress.report(source, "embeddings", 0, len(missing))
    for page in chunks.pages(missing) if missing else ():
        for start in range(0, len(page), batch_size):
            rows = page[start:start + batch_size]
            started = time.perf_counter()
            vectors = embedder.embed([embedding_text(r["context"], r["text"]) for r in rows])
            spent += time.perf_counter() - started
            pending += [VectorPoint(r["chunk_id"], vector, payload(r))
                        for r, vector in zip(rows, vectors, strict=True)]
            if done == 0 or len(pending) >= write_batch:
                write()
            done += len(rows)
            progress.report(source, "embeddings", done, len(missing))
    if pending or unwritten_deletes:
        write()
    return SyncReport(embedded=len(missing), reused=len(current & stored),
                      deleted=len(vanished), embed_seconds=spent)
