"""The raw tables of a vault: one row per note (its frontmatter, tags, links, headings and
body) and per attachment. Declared once as polars schemas; the DDL is generated from them."""

from __future__ import annotations

import polars as pl

from jarvis_core.stores.tables import Table

_WIKILINK = pl.Struct({"target": pl.Utf8, "heading": pl.Utf8, "block": pl.Utf8,
                       "alias": pl.Utf8, "embed": pl.Boolean, "line": pl.Int32})
_LINK = pl.Struct({"url": pl.Utf8, "text": pl.Utf8, "line": pl.Int32,
                   "image": pl.Boolean, "bare": pl.Boolean})
_HEADING = pl.Struct({"level": pl.Int32, "text": pl.Utf8, "line": pl.Int32})
_RELATION = pl.Struct({"subject": pl.Utf8, "relation": pl.Utf8, "object": pl.Utf8,
                       "line": pl.Int32})
_TAG_LINES = pl.Struct({"tag": pl.Utf8, "lines": pl.List(pl.Int32)})

NOTES = Table("notes", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "note_key": pl.Utf8, "title": pl.Utf8,
    "size_bytes": pl.Int64, "mtime_ns": pl.Int64, "content_hash": pl.Utf8,
    "parser_version": pl.Int32, "frontmatter": pl.Utf8, "frontmatter_error": pl.Utf8,
    "aliases": pl.List(pl.Utf8), "tags": pl.List(pl.Utf8), "tag_lines": pl.List(_TAG_LINES),
    "wikilinks": pl.List(_WIKILINK), "embeds": pl.List(_WIKILINK), "links": pl.List(_LINK),
    "headings": pl.List(_HEADING), "block_ids": pl.List(pl.Utf8),
    "relations": pl.List(_RELATION), "frontmatter_links": pl.Utf8,
    "created_at": pl.Datetime("us"), "modified_at": pl.Datetime("us"),
    "body": pl.Utf8, "body_start_line": pl.Int32, "word_count": pl.Int32,
    "warnings": pl.List(pl.Utf8), "ingested_at": pl.Datetime("us"),
}), ("source", "path"))

ATTACHMENTS = Table("attachments", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "extension": pl.Utf8,
    "size_bytes": pl.Int64, "mtime_ns": pl.Int64,
}), ("source", "path"))

TABLES = (NOTES, ATTACHMENTS)
