"""A source's chunks with everything their vectors and keyword entries carry, read a page at
a time: the vector and keyword layers never hold a whole source's texts."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from jarvis_core.stores import tables
from jarvis_core.stores.tables import Connect

# The chunk columns a vector or keyword entry carries, with its document's tags (a note's
# tags, a ticket's or page's labels) and modification time from the ``documents`` table
# every kind fills.
PAYLOAD_SQL = """
    SELECT c.chunk_id, c.source, c.source_type, c.doc_key, c.path, c.title,
           c.heading_path, c.context, c.text,
           coalesce(d.tags, []::VARCHAR[]) AS tags, d.modified_at
    FROM chunks c
    LEFT JOIN documents d ON d.source = c.source AND d.doc_key = c.doc_key
    WHERE c.source = $1
"""
READ_PAGE = 2048  # chunk rows read per tables connection


class ChunkRows(Protocol):
    """A source's chunks, read a page at a time."""

    def ids(self) -> set[str]: ...

    def pages(self, wanted: Collection[str]) -> Iterator[list[dict]]: ...


@dataclass(frozen=True)
class TableRows:
    """A source's chunks in the tables, each page read in a connection of its own."""

    connect: Connect
    source: str
    page: int = READ_PAGE

    def ids(self) -> set[str]:
        with self.connect() as conn:
            return {chunk_id for (chunk_id,) in conn.execute(
                "SELECT chunk_id FROM chunks WHERE source = $1", [self.source]).fetchall()}

    def pages(self, wanted: Collection[str]) -> Iterator[list[dict]]:
        ordered = sorted(wanted)
        for start in range(0, len(ordered), self.page):
            with self.connect() as conn:
                rows = tables.read_dicts(conn, PAYLOAD_SQL + " AND c.chunk_id IN "
                                         "(SELECT unnest($2))",
                                         [self.source, ordered[start:start + self.page]])
            yield sorted(rows, key=lambda row: row["chunk_id"])


@dataclass(frozen=True)
class FrameRows:
    """Chunks already in memory (a benchmark's corpus, a test's rows)."""

    frame: pl.DataFrame

    def ids(self) -> set[str]:
        return set(self.frame["chunk_id"].to_list())

    def pages(self, wanted: Collection[str]) -> Iterator[list[dict]]:
        chosen = self.frame.filter(pl.col("chunk_id").is_in(list(wanted))).sort("chunk_id")
        for page in chosen.iter_slices(READ_PAGE):
            yield page.to_dicts()
