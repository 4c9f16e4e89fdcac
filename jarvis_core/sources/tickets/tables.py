"""The raw tables of a ticket set: one row per ticket with its comments and issue links
(``text`` is the markdown it is chunked as), and the hash of every export file read.
Declared once as polars schemas; the DDL is generated from them."""

from __future__ import annotations

import polars as pl

from jarvis_core.stores.tables import Table

_PERSON = pl.Struct({"name": pl.Utf8, "email": pl.Utf8, "account": pl.Utf8})

TICKETS = Table("tickets", pl.Schema({
    "source": pl.Utf8, "key": pl.Utf8, "path": pl.Utf8, "file_hash": pl.Utf8,
    "system": pl.Utf8, "number": pl.Int64, "repo": pl.Utf8, "summary": pl.Utf8,
    "description": pl.Utf8, "status": pl.Utf8, "type": pl.Utf8, "priority": pl.Utf8,
    "labels": pl.List(pl.Utf8), "components": pl.List(pl.Utf8),
    "fix_versions": pl.List(pl.Utf8), "assignee": _PERSON, "reporter": _PERSON,
    "created_at": pl.Datetime("us"), "updated_at": pl.Datetime("us"),
    "resolved_at": pl.Datetime("us"),
    "comments": pl.List(pl.Struct({"author": _PERSON, "created_at": pl.Datetime("us"),
                                   "body": pl.Utf8})),
    "links": pl.List(pl.Struct({"type": pl.Utf8, "direction": pl.Utf8, "phrase": pl.Utf8,
                                "outward": pl.Utf8, "target": pl.Utf8})),
    "url": pl.Utf8, "is_pull_request": pl.Boolean, "text": pl.Utf8, "content_hash": pl.Utf8,
    "warnings": pl.List(pl.Utf8), "ingested_at": pl.Datetime("us"),
}), ("source", "key"))

TICKET_FILES = Table("ticket_files", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "file_hash": pl.Utf8, "keys": pl.List(pl.Utf8),
}), ("source", "path"))

TABLES = (TICKETS, TICKET_FILES)
