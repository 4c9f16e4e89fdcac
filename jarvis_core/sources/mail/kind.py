"""The mail kind: mbox files, Maildir folders and .eml files, one thread per document."""

from __future__ import annotations

from jarvis_core.sources.changes import export_watch
from jarvis_core.sources.kind import (
    Details,
    DocumentType,
    FailedRatio,
    RawAsset,
    SourceKind,
    person,
)
from jarvis_core.sources.listings import mail_files
from jarvis_core.sources.mail.settings import MailConfig

MAIL = SourceKind(
    name="mail", package=__package__, section="mail", label="mail", settings=MailConfig,
    asset=RawAsset(
        "raw_mail",
        "Messages and threads of one mail source (partition): mbox files, Maildir folders and "
        ".eml files, each message with its people, text body and attachments listed; threads "
        "from In-Reply-To/References, their quoted replies collapsed.\n\nWhen every mail file "
        "hashes as before nothing is parsed; otherwise unchanged files give their stored "
        "messages and a grown mbox is read from where the last run stopped. Only threads whose "
        "content changed are rewritten, vanished ones deleted. Messages that cannot be read "
        "are recorded in ``ingest_failures`` and the rest goes on.",
        ("duckdb", "python")),
    documents=(DocumentType("email", """
        SELECT source, 'email' AS source_type, 'thread:' || source || '/' || thread_id AS doc_key,
               'threads/' || thread_id AS path, subject AS title, text,
               content_hash AS doc_hash, last_at AS modified_at, []::VARCHAR[] AS tags,
               list_transform(list_distinct([thread_id] || message_ids), id -> lower(id))
                   AS names
        FROM mail_threads WHERE source = $1""", Details(
        facts=f"""
            SELECT started_at AS created_at, message_count AS messages,
                   list_transform(participants, p -> {person('p')}) AS participants
            FROM mail_threads WHERE source = $1 AND 'threads/' || thread_id = $2""",
        lists={"messages": f"""
            SELECT message_id, sent_at, {person('sender')} AS "from",
                   list_transform(recipients, p -> {person('p')}) AS "to",
                   list_transform(cc, p -> {person('p')}) AS cc, subject,
                   list_transform(attachments, a -> a.filename) AS attachments, warnings
            FROM mail_messages WHERE source = $1 AND 'threads/' || thread_id = $2
            ORDER BY sent_at, message_id"""})),),
    serving={"mail_messages": "SELECT * EXCLUDE (body) FROM mail_messages",
             "mail_threads": "SELECT * EXCLUDE (text) FROM mail_threads",
             "mail_files": "SELECT source, path, kind, file_hash FROM mail_files"},
    counts={"messages": "mail_messages", "threads": "mail_threads"},
    ingested="mail_messages",
    watch=export_watch(mail_files, "mail_files"),
    failed_ratio=FailedRatio("failed_message_ratio", "mail files and messages"),
)
