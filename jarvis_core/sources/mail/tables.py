"""The raw tables of a mail source: every message as read, the threads they form (``text`` is
the thread document that is chunked), and what was read from each mail file (an mbox's
digest and offset, so a grown mbox is read from where the last run stopped). Declared once
as polars schemas; the DDL is generated from them."""

from __future__ import annotations

import polars as pl

from jarvis_core.sources.export_rows import IDENTITY, ITEM_FAILURE
from jarvis_core.stores.tables import Table

MAIL_MESSAGES = Table("mail_messages", pl.Schema({
    "source": pl.Utf8, "message_id": pl.Utf8, "thread_id": pl.Utf8, "file": pl.Utf8,
    "item": pl.Utf8, "sent_at": pl.Datetime("us"), "sender": IDENTITY,
    "recipients": pl.List(IDENTITY), "cc": pl.List(IDENTITY), "subject": pl.Utf8,
    "in_reply_to": pl.Utf8, "reference_ids": pl.List(pl.Utf8), "body": pl.Utf8,
    "body_type": pl.Utf8,
    "attachments": pl.List(pl.Struct({"filename": pl.Utf8, "content_type": pl.Utf8,
                                      "size": pl.Int64, "part": pl.Utf8})),
    "warnings": pl.List(pl.Utf8), "derived_id": pl.Boolean, "row_hash": pl.Utf8,
    "ingested_at": pl.Datetime("us"),
}), ("source", "message_id"))

MAIL_THREADS = Table("mail_threads", pl.Schema({
    "source": pl.Utf8, "thread_id": pl.Utf8, "subject": pl.Utf8,
    "message_ids": pl.List(pl.Utf8), "message_count": pl.Int32,
    "participants": pl.List(IDENTITY), "started_at": pl.Datetime("us"),
    "last_at": pl.Datetime("us"), "text": pl.Utf8,
    "sections": pl.List(pl.Struct({"message_id": pl.Utf8, "char_start": pl.Int32,
                                   "char_end": pl.Int32})),
    "content_hash": pl.Utf8, "ingested_at": pl.Datetime("us"),
}), ("source", "thread_id"))

MAIL_FILES = Table("mail_files", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "kind": pl.Utf8, "file_hash": pl.Utf8,
    "digest": pl.Utf8, "bytes_read": pl.Int64, "message_count": pl.Int64,
    "messages": pl.List(pl.Struct({"message_id": pl.Utf8, "item": pl.Utf8})),
    "failures": pl.List(ITEM_FAILURE),
}), ("source", "path"))

TABLES = (MAIL_MESSAGES, MAIL_THREADS, MAIL_FILES)
