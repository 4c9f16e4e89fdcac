"""One row per text file."""

import polars as pl

from jarvis_core.stores.tables import Table

TEXT_FILES = Table("text_files", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8,
    "file_hash": pl.Utf8, "modified_at": pl.Datetime("us"), "ingested_at": pl.Datetime("us"),
}), ("source", "path"))

TABLES = (TEXT_FILES,)
