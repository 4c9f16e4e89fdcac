"""Mail and Confluence rows in DuckDB: what a run stores turns back into exactly what the parser
returned, so the next run reuses unchanged files, reads only the new part of a grown mbox and
converts only changed page versions; counts and failures per item."""

import duckdb
import pytest

from jarvis_core.sources import registry
from jarvis_core.sources.confluence import ingest as page_tables
from jarvis_core.sources.mail import ingest as mail_tables
from jarvis_core.sources.mail.read import MailRead
from jarvis_core.sources.plan import utc_now
from jarvis_core.stores import tables
from tests.export_helpers import (
    DANIEL,
    SAM,
    jira_macro,
    message,
    rest_page,
    write_maildir,
    write_mbox,
    write_rest_export,
)


@pytest.fixture
def conn():
    with duckdb.connect() as connection:
        tables.ensure_schema(connection, registry.declared_tables())
        yield connection


def ingest_mail(conn, root, batch_threads=100):
    stored = mail_tables.read_stored(conn, "mail")
    hashes = mail_tables.mail_file_hashes(root)
    if stored.unchanged(hashes):
        return None, None
    read = mail_tables.read_changed_mail(conn, "mail", root, stored)
    return read, mail_tables.write_mail(conn, "mail", read, hashes, stored, utc_now(),
                                        batch_threads)


def stored_mail(conn) -> dict[str, list]:
    """The threads and messages stored (but a Maildir file's name, which is random)."""
    return {table: conn.execute(f"SELECT * EXCLUDE ({leave_out}) FROM {table} "
                                "ORDER BY ALL").fetchall()
            for table, leave_out in (("mail_messages", "ingested_at, file, row_hash"),
                                     ("mail_threads", "ingested_at"))}


def test_threads_written_a_batch_at_a_time_are_those_written_at_once(tmp_path):
    """Three threads in batches of one: the same rows as in one batch, also after a reply
    changes a thread and a deleted file takes another away."""
    outcomes = []
    for batch_threads in (1, 100):
        root = tmp_path / str(batch_threads)
        box = write_mbox(root / "dev.mbox", message("a@x", "Dedupe", "LUM-4?\n"),
                         message("b@x", "Re: Dedupe", "boot_id.\n", hour=11, reply_to="a@x"),
                         message("e@x", "Release", "Friday.\n", day=14))
        write_maildir(root / "Inbox", message("c@x", "Alerts", "Bulk.\n", day=12))
        with duckdb.connect() as conn:
            tables.ensure_schema(conn, registry.declared_tables())
            ingest_mail(conn, root, batch_threads)
            first = stored_mail(conn)
            write_mbox(box, message("d@x", "Re: Dedupe", "Merged.\n", day=13, reply_to="b@x"))
            next(path for path in (root / "Inbox").rglob("*") if path.is_file()).unlink()
            _, written = ingest_mail(conn, root, batch_threads)
            outcomes.append((first, stored_mail(conn), written.counts.as_dict(),
                             written.messages))
    in_batches, at_once = outcomes
    assert [len(rows["mail_threads"]) for rows in at_once[:2]] == [3, 2]
    assert at_once[2] == {"new": 0, "changed": 1, "unchanged": 1, "deleted": 1, "failed": 0}
    assert at_once[3] == {"new": 1, "changed": 0, "unchanged": 3, "deleted": 1}
    assert in_batches == at_once


def test_stored_messages_are_the_parsed_ones_and_a_grown_mbox_reads_only_its_tail(conn, tmp_path):
    box = write_mbox(tmp_path / "lists" / "dev.mbox",
                     message("a@x", "Dedupe", "LUM-4?\n", cc=DANIEL),
                     message("b@x", "Re: Dedupe", "boot_id.\n", sender=SAM, hour=11,
                             reply_to="a@x"))
    write_maildir(tmp_path / "Inbox", message("c@x", "Alerts", "Bulk.\n", day=12))
    (tmp_path / "junk.eml").write_bytes(b"no headers at all\n")
    first, written = ingest_mail(conn, tmp_path)

    assert mail_tables.stored_messages(conn, "mail") == first.messages
    assert mail_tables.read_stored(conn, "mail").files == first.files
    assert written.counts.as_dict() == {"new": 2, "changed": 0, "unchanged": 0, "deleted": 0,
                                        "failed": 1}
    assert [(f["path"], f["reason"]) for f in written.failures] == [
        ("junk.eml", "not a mail message: no From, Date, Subject or Message-ID header")]
    assert ingest_mail(conn, tmp_path) == (None, None)  # every file hashes as stored

    write_mbox(box, message("d@x", "Re: Dedupe", "Merged.\n", day=13, reply_to="b@x"))
    grown, written = ingest_mail(conn, tmp_path)
    assert (grown.parsed, grown.reused) == (1, 3)
    assert (written.counts.changed, written.counts.unchanged, written.messages["new"]) == (1, 1, 1)
    assert conn.execute("SELECT message_ids FROM mail_threads WHERE thread_id = 'a@x'"
                        ).fetchone() == (["a@x", "b@x", "d@x"],)
    assert conn.execute("SELECT count(*) FROM ingest_failures").fetchone() == (1,)


def test_a_source_no_longer_configured_leaves_no_rows(conn, tmp_path):
    write_mbox(tmp_path / "dev.mbox", message("a@x", "Dedupe"))
    ingest_mail(conn, tmp_path)
    stored = mail_tables.read_stored(conn, "mail")
    written = mail_tables.write_mail(conn, "mail", MailRead(), {}, stored, utc_now(), 100)

    assert written.counts.deleted == 1
    for table in ("mail_messages", "mail_threads", "mail_files"):
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)


def ingest_pages(conn, root):
    stored = page_tables.read_stored(conn, "wiki")
    hashes = page_tables.export_file_hashes(root)
    if stored.unchanged(hashes):
        return None, None
    read = page_tables.read_changed_export(conn, "wiki", root, stored)
    return read, page_tables.write_pages(conn, "wiki", read, hashes, stored, utc_now())


def pages(architecture_version: int = 1, architecture_body: str = "<p>Components.</p>"):
    return [rest_page("1", "Home", f"<p>Start. {jira_macro('LUM-4')}</p>", labels=("lumen",)),
            rest_page("2", "Architecture", architecture_body, ancestors=[("1", "Home")],
                      version=architecture_version)]


def test_stored_pages_are_the_parsed_ones_and_only_a_new_version_is_converted(conn, tmp_path):
    content = write_rest_export(tmp_path / "content.json", pages())
    (tmp_path / "broken.json").write_text("[")
    first, written = ingest_pages(conn, tmp_path)

    assert page_tables.stored_pages(conn, "wiki") == first.pages
    assert page_tables.read_stored(conn, "wiki").files == first.files
    assert (written.counts.new, written.counts.failed) == (2, 1)
    assert ingest_pages(conn, tmp_path) == (None, None)

    write_rest_export(content, pages(2, "<p>Building blocks.</p>"))
    edited, written = ingest_pages(conn, tmp_path)
    assert (edited.parsed, edited.reused) == (1, 1)
    assert (written.counts.changed, written.counts.unchanged) == (1, 1)
    assert [row["page_id"] for row in written.rows] == ["2"]

    write_rest_export(content, pages(2, "<p>Building blocks.</p>")[:1])
    _, written = ingest_pages(conn, tmp_path)
    assert written.counts.deleted == 1
    assert conn.execute("SELECT page_id FROM pages").fetchall() == [("1",)]
    assert conn.execute("SELECT path, file_hash IS NOT NULL, len(entries) FROM page_files "
                        "ORDER BY path").fetchall() == [("broken.json", True, 1),
                                                        ("content.json", True, 1)]
