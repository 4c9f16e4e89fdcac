"""The one interface the chunk retrievers share, so that composers (hybrid search, GraphRAG)
take any of them: given a published snapshot, a query and filters, hits (jarvis_query/
results.py), best first. A retriever loads what it needs per published version and never
validates arguments (the facade does, jarvis_query/validation.py)."""

from __future__ import annotations

from typing import Protocol

from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.results import Hit
from jarvis_query.snapshot import Snapshot


class Retriever(Protocol):
    def retrieve(self, snapshot: Snapshot, query: str, limit: int,
                 filters: VectorFilter | None = None) -> list[Hit]:
        """Up to ``limit`` hits matching ``filters``, best first, each with its chunk id and
        score."""
        ...
