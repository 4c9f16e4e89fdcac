"""Helpers for tests of the keyword index: chunk rows as ``KeywordIndex.sync_source`` reads
them, one per call, and a source's rows of them."""

import polars as pl

from jarvis_core.stores.chunk_rows import FrameRows
from jarvis_core.stores.keyword import CHUNK_COLUMNS


def chunk(chunk_id: str, text: str, **fields) -> dict:
    row = {"chunk_id": chunk_id, "source_type": "note", "doc_key": f"note:v/{chunk_id}.md",
           "path": f"Folder/{chunk_id}.md", "title": chunk_id.title(), "heading_path": [],
           "text": text, "tags": [], "modified_at": None}
    return row | fields


def chunk_rows(*rows: dict) -> FrameRows:
    return FrameRows(pl.DataFrame(list(rows), schema={
        "chunk_id": pl.Utf8, "source_type": pl.Utf8, "doc_key": pl.Utf8, "path": pl.Utf8,
        "title": pl.Utf8, "heading_path": pl.List(pl.Utf8), "text": pl.Utf8,
        "tags": pl.List(pl.Utf8), "modified_at": pl.Datetime("us")}).select(CHUNK_COLUMNS))
