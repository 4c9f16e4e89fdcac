"""A mail source's rows in the tables: what earlier runs stored, turned back into the parser's
objects (so unchanged files, and the part of a grown mbox read before, are not parsed again),
and writing what a read found.

Counted per thread, as the chunks layer counts documents: a thread is new, changed (its
content hash moved: a reply arrived, a message changed) or unchanged; messages are rewritten
when their row changed. Messages that could not be read are ``ingest_failures`` rows named
``<file>#<item>``; warnings stay on their message's row.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from jarvis_core.sources.changes import file_hashes
from jarvis_core.sources.export_rows import (
    failure_rows,
    identity_of,
    identity_row,
    ingest_export,
    row_hash,
    warning_count,
)
from jarvis_core.sources.kind import Ingested, IngestRun
from jarvis_core.sources.mail.read import (
    Attachment,
    MailError,
    MailFile,
    MailMessage,
    MailRead,
    MailThread,
    mail_files,
    read_mail_source,
)
from jarvis_core.sources.mail.tables import MAIL_FILES, MAIL_MESSAGES, MAIL_THREADS
from jarvis_core.sources.mail.threads import THREAD_VERSION, build_thread, group_threads
from jarvis_core.sources.plan import PREVIEW_ROWS, ItemCounts
from jarvis_core.stores import tables

MAIL_KIND = "mail"
# The mail_files row (path "", which the change sensors skip) recording what else shapes the
# threads, so a new thread format rebuilds them although no mail file changed.
_SETTINGS = ""
_SETTINGS_ID = f"threads v{THREAD_VERSION}"


def mail_file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every mail file, by path relative to the source (what the sensor compares);
    MailError for a source that does not exist."""
    if not root.exists():
        raise MailError(f"mail source path does not exist: {root}")
    return file_hashes((path, relative) for path, relative, _ in mail_files(root))


def message_row(source: str, message: MailMessage, thread_id: str | None) -> dict:
    row = {
        "source": source, "message_id": message.message_id, "thread_id": thread_id,
        "file": message.file, "item": message.item, "sent_at": message.date,
        "sender": identity_row(message.sender),
        "recipients": [identity_row(p) for p in message.to],
        "cc": [identity_row(p) for p in message.cc], "subject": message.subject,
        "in_reply_to": message.in_reply_to, "reference_ids": list(message.references),
        "body": message.body, "body_type": message.body_type,
        "attachments": [{"filename": a.filename, "content_type": a.content_type,
                         "size": a.size, "part": a.part} for a in message.attachments],
        "warnings": list(message.warnings), "derived_id": message.derived_id}
    return {**row, "row_hash": row_hash(row)}


def message_of(row: dict) -> MailMessage:
    return MailMessage(
        message_id=row["message_id"], file=row["file"], item=row["item"], date=row["sent_at"],
        sender=identity_of(row["sender"]),
        to=tuple(identity_of(p) for p in row["recipients"] or ()),
        cc=tuple(identity_of(p) for p in row["cc"] or ()), subject=row["subject"],
        in_reply_to=row["in_reply_to"], references=tuple(row["reference_ids"] or ()),
        body=row["body"], body_type=row["body_type"],
        attachments=tuple(Attachment(a["filename"], a["content_type"], a["size"], a["part"])
                          for a in row["attachments"] or ()),
        warnings=tuple(row["warnings"] or ()), derived_id=bool(row["derived_id"]))


def file_of(row: dict) -> MailFile:
    return MailFile(row["path"], row["kind"], row["digest"], row["bytes_read"],
                    row["message_count"],
                    tuple((m["message_id"], m["item"]) for m in row["messages"] or ()),
                    tuple((f["item"], f["reason"]) for f in row["failures"] or ()))


@dataclass(frozen=True)
class StoredMail:
    """What earlier runs stored: the mail files with their hashes, each thread's content
    hash, each message's row hash, and how many items failed."""

    file_rows: list[dict]
    threads: dict[str, str]
    messages: dict[str, str]
    failed: int

    @property
    def hashes(self) -> dict[str, str]:
        return {row["path"]: row["file_hash"] for row in self.file_rows}

    def unchanged(self, hashes: dict[str, str]) -> bool:
        """Every mail file hashes as stored and threads are made as before: nothing to read."""
        return self.hashes == {**hashes, _SETTINGS: _SETTINGS_ID}

    @property
    def files(self) -> dict[str, MailFile]:
        return {row["path"]: file_of(row) for row in self.file_rows if row["path"] != _SETTINGS}


def read_stored(conn: duckdb.DuckDBPyConnection, source: str) -> StoredMail:
    return StoredMail(
        tables.read_frame(conn, "SELECT * EXCLUDE (source) FROM mail_files WHERE source = ?",
                          [source]).to_dicts(),
        dict(conn.execute("SELECT thread_id, content_hash FROM mail_threads WHERE source = ?",
                          [source]).fetchall()),
        dict(conn.execute("SELECT message_id, row_hash FROM mail_messages WHERE source = ?",
                          [source]).fetchall()),
        conn.execute("SELECT count(*) FROM ingest_failures WHERE source = ?",
                     [source]).fetchone()[0])


def stored_messages(conn: duckdb.DuckDBPyConnection, source: str) -> dict[str, MailMessage]:
    """Every stored message, as the parser returned it (read only when some file changed)."""
    return {row["message_id"]: message_of(row) for row in tables.iter_dicts(
        conn, "SELECT * FROM mail_messages WHERE source = ?", [source])}


@dataclass(frozen=True)
class MailWrite:
    """What writing a mail read did."""

    counts: ItemCounts            # threads
    messages: dict[str, int]      # messages new, changed, unchanged, deleted
    threads: list[dict]           # the first threads written (new and changed), without text
    failures: list[dict]
    warnings: int


def thread_row(source: str, thread: MailThread, now: datetime) -> dict:
    return {"source": source, "thread_id": thread.thread_id, "subject": thread.subject,
            "message_ids": list(thread.message_ids), "message_count": len(thread.message_ids),
            "participants": [identity_row(p) for p in thread.participants],
            "started_at": thread.started_at, "last_at": thread.last_at, "text": thread.text,
            "sections": [{"message_id": mid, "char_start": start, "char_end": end}
                         for mid, start, end in thread.sections],
            "content_hash": thread.content_hash, "ingested_at": now}


def file_row(source: str, state: MailFile, file_hash: str | None) -> dict:
    return {"source": source, "path": state.path, "kind": state.kind, "file_hash": file_hash,
            "digest": state.digest, "bytes_read": state.offset, "message_count": state.count,
            "messages": [{"message_id": mid, "item": item} for mid, item in state.messages],
            "failures": [{"item": item, "reason": reason} for item, reason in state.failures]}


class _Tally:
    """Keys seen so far against the stored hashes: new and changed are written batch by
    batch; what was stored and never seen is deleted at the end."""

    def __init__(self, stored: dict[str, str]) -> None:
        self.stored, self.seen = stored, set()
        self.new = self.changed = self.unchanged = 0

    def to_write(self, current: dict[str, str]) -> tuple[list[str], list[str]]:
        """The new and the changed keys of a batch."""
        self.seen.update(current)
        new = [key for key in current if key not in self.stored]
        changed = [key for key in current if key in self.stored and
                   self.stored[key] != current[key]]
        self.new, self.changed = self.new + len(new), self.changed + len(changed)
        self.unchanged += len(current) - len(new) - len(changed)
        return new, changed

    def deleted(self) -> list[str]:
        """The stored keys never seen (asked once, after the last batch)."""
        return [key for key in self.stored if key not in self.seen]


def write_mail(conn: duckdb.DuckDBPyConnection, source: str, read: MailRead,
               hashes: dict[str, str], stored: StoredMail, now: datetime,
               batch_threads: int) -> MailWrite:
    """Rewrite the threads whose content hash and the messages whose row changed, remove
    those gone, record every mail file's hash and read state and the per-item failures.
    Thread documents and rows are made and written ``batch_threads`` threads at a time,
    with their messages, so only the messages as read are held whole. The files' hashes are
    written last: a write cut short leaves them as they were, and the next run compares
    every thread again."""
    threads, messages = _Tally(stored.threads), _Tally(stored.messages)
    preview: list[dict] = []
    grouped = group_threads(read.messages.values())
    for start in range(0, len(grouped), batch_threads):
        groups = grouped[start:start + batch_threads]
        built = [build_thread(group) for group in groups]
        new, changed = threads.to_write({t.thread_id: t.content_hash for t in built})
        written = set(new + changed)
        thread_rows = [thread_row(source, thread, now) for thread in built
                       if thread.thread_id in written]
        preview += [{k: v for k, v in row.items() if k != "text"}
                    for row in thread_rows[:PREVIEW_ROWS - len(preview)]]
        rows = {message.message_id: message_row(source, message, thread.thread_id)
                for thread, group in zip(built, groups, strict=True) for message in group}
        new_ids, changed_ids = messages.to_write({mid: row["row_hash"]
                                                  for mid, row in rows.items()})
        for table, key, removed, written_rows in (
                (MAIL_THREADS, "thread_id", changed, thread_rows),
                (MAIL_MESSAGES, "message_id", changed_ids,
                 [{**rows[mid], "ingested_at": now} for mid in new_ids + changed_ids])):
            tables.replace_rows(conn, table, source=source, remove_paths=removed,
                                rows=written_rows, key_column=key)
    threads_deleted, messages_deleted = threads.deleted(), messages.deleted()
    for table, key, deleted in ((MAIL_THREADS, "thread_id", threads_deleted),
                                (MAIL_MESSAGES, "message_id", messages_deleted)):
        tables.replace_rows(conn, table, source=source, remove_paths=deleted, rows=(),
                            key_column=key)
    failures = failure_rows(source, read.problems, now)
    file_rows = [file_row(source, state, hashes.get(path))
                 for path, state in sorted(read.files.items())]
    if hashes:  # what shapes the threads (not for a source being removed)
        file_rows.append({"source": source, "path": _SETTINGS, "file_hash": _SETTINGS_ID})
    for table, rows in ((tables.INGEST_FAILURES, failures), (MAIL_FILES, file_rows)):
        tables.replace_rows(conn, table, source=source, remove_paths=None, rows=rows)
    counts = ItemCounts(threads.new, threads.changed, threads.unchanged,
                        len(threads_deleted), failed=len(failures))
    return MailWrite(counts, {"new": messages.new, "changed": messages.changed,
                              "unchanged": messages.unchanged,
                              "deleted": len(messages_deleted)},
                     preview, failures, warning_count(read.problems))


def mail_figures(conn: duckdb.DuckDBPyConnection, source: str) -> dict[str, int]:
    """Stored totals of a mail source."""
    messages, threads, files, failed = conn.execute(
        "SELECT (SELECT count(*) FROM mail_messages WHERE source = $1), "
        "(SELECT count(*) FROM mail_threads WHERE source = $1), "
        "(SELECT count(*) FROM mail_files WHERE source = $1 AND path <> ''), "
        "(SELECT count(*) FROM ingest_failures WHERE source = $1)", [source]).fetchone()
    return {"messages": messages, "threads": threads, "mail_files": files, "failed": failed}


def read_changed_mail(conn: duckdb.DuckDBPyConnection, source: str, root: Path,
                      stored: StoredMail) -> MailRead:
    """Read the mail source, taking unchanged files and the part of a grown mbox read
    before from the stored rows."""
    return read_mail_source(root, files=stored.files, messages=stored_messages(conn, source))


def _written(conn: duckdb.DuckDBPyConnection, run: IngestRun, read: MailRead,
             hashes: dict[str, str], stored: StoredMail) -> Ingested:
    written = write_mail(conn, run.source, read, hashes, stored, run.now, run.batch_items)
    figures = mail_figures(conn, run.source)
    return Ingested(
        counts=written.counts.as_dict(), rows=figures["messages"], location=None,
        failures=written.failures, preview=written.threads,
        preview_columns=("subject", "message_count", "started_at", "last_at"),
        figures={"threads": figures["threads"], "files": figures["mail_files"],
                 "files_changed": True, "messages_parsed": read.parsed,
                 "messages_reused": read.reused, "warnings": written.warnings},
        tables={"messages_summary": written.messages})


def ingest(run: IngestRun) -> Ingested:
    """The mail files that changed read (a grown mbox from where it stopped), the threads
    whose content changed rewritten."""
    return ingest_export(run, read_stored=read_stored, file_hashes=mail_file_hashes,
                         read_changed=read_changed_mail, nothing_read=MailRead,
                         vanished=MailError,
                         unchanged_counts=lambda stored: (len(stored.threads),
                                                          len(stored.messages)),
                         write=_written)
