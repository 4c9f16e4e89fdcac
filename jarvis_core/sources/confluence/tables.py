"""The raw tables of a Confluence export: one row per current page (``text`` is its document),
and per export file its hash and the pages each of its entries (a zip holds many) gave.
Declared once as polars schemas; the DDL is generated from them."""

from __future__ import annotations

import polars as pl

from jarvis_core.sources.export_rows import IDENTITY, ITEM_FAILURE
from jarvis_core.stores.tables import Table

PAGES = Table("pages", pl.Schema({
    "source": pl.Utf8, "page_id": pl.Utf8, "kind": pl.Utf8, "space": pl.Utf8,
    "title": pl.Utf8, "parent_id": pl.Utf8,
    "ancestors": pl.List(pl.Struct({"page_id": pl.Utf8, "title": pl.Utf8})),
    "author": IDENTITY, "editor": IDENTITY, "created_at": pl.Datetime("us"),
    "updated_at": pl.Datetime("us"), "labels": pl.List(pl.Utf8), "version": pl.Int64,
    "revision": pl.Utf8, "text": pl.Utf8,
    "links": pl.List(pl.Struct({"page_id": pl.Utf8, "title": pl.Utf8, "space": pl.Utf8,
                                "written": pl.Utf8})),
    "jira_keys": pl.List(pl.Utf8), "mentions": pl.List(IDENTITY),
    "attachments": pl.List(pl.Struct({"name": pl.Utf8, "media_type": pl.Utf8,
                                      "size": pl.Int64, "attachment_id": pl.Utf8})),
    "url": pl.Utf8, "file": pl.Utf8, "item": pl.Utf8, "warnings": pl.List(pl.Utf8),
    "content_hash": pl.Utf8, "parser_version": pl.Int32, "row_hash": pl.Utf8,
    "ingested_at": pl.Datetime("us"),
}), ("source", "page_id"))

PAGE_FILES = Table("page_files", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "file_hash": pl.Utf8,
    "entries": pl.List(pl.Struct({"path": pl.Utf8, "digest": pl.Utf8,
                                  "page_ids": pl.List(pl.Utf8),
                                  "failures": pl.List(ITEM_FAILURE)})),
}), ("source", "path"))

TABLES = (PAGES, PAGE_FILES)
