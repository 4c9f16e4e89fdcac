"""Nothing outside a source's folder is read: file and folder symlinks that leave a vault or
an export are refused and reported; names that are not UTF-8 are reported, never stored."""

import json
import os
from pathlib import Path

import duckdb
import pytest

from jarvis_core.sources import registry
from jarvis_core.sources.changes import export_files
from jarvis_core.sources.confinement import NOT_UTF8_NAME, OUTSIDE_SOURCE
from jarvis_core.sources.listings import confluence_export_files as confluence_files
from jarvis_core.sources.listings import mail_files, ticket_files
from jarvis_core.sources.tickets.export import read_ticket_set
from jarvis_core.sources.vault.ingest import StoredNotes, plan_ingest, write_plan
from jarvis_core.sources.vault.scan import NoteReadError, read_note, scan_vault
from jarvis_core.stores import tables

SECRET = "zebracorn-7731 the launch code"
ISSUE = {"key": "LUM-1", "fields": {"summary": "A ticket", "description": SECRET}}


@pytest.fixture
def outside(tmp_path) -> Path:
    """A secret file and a folder of secrets next to (not inside) the source folder."""
    folder = tmp_path / "outside"
    (folder / "deep").mkdir(parents=True)
    (folder / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    (folder / "deep" / "inner.md").write_text(f"{SECRET} again\n")
    (folder / "secret.json").write_text(json.dumps(ISSUE))
    return folder


def _vault(tmp_path: Path, outside: Path) -> Path:
    vault = tmp_path / "vault"
    (vault / "Bad").mkdir(parents=True)
    (vault / "Good").mkdir()
    (vault / "Good" / "note.md").write_text("# Note\n\nfine\n")
    os.symlink(outside / "secret.md", vault / "Bad" / "secret.md")       # file symlink out
    os.symlink(outside, vault / "Linked")                                # folder symlink out
    os.symlink("../Good/note.md", vault / "Bad" / "alias.md")            # inside: allowed
    os.symlink("/etc/passwd", vault / "Bad" / "passwd.md")
    return vault


def test_vault_symlinks_that_leave_the_vault_are_refused_and_reported(tmp_path, outside):
    scan = scan_vault(_vault(tmp_path, outside))
    assert sorted(f.path for f in scan.notes) == ["Bad/alias.md", "Good/note.md"]
    assert {p.path: p.reason for p in scan.problems} == {
        "Bad/secret.md": OUTSIDE_SOURCE, "Bad/passwd.md": OUTSIDE_SOURCE,
        "Linked": OUTSIDE_SOURCE}


def test_a_file_swapped_for_a_symlink_after_the_scan_is_not_read(tmp_path, outside):
    vault = _vault(tmp_path, outside)
    [note] = [f for f in scan_vault(vault).notes if f.path == "Good/note.md"]
    (vault / "Good" / "note.md").unlink()
    os.symlink(outside / "secret.md", vault / "Good" / "note.md")
    with pytest.raises(NoteReadError, match="outside the source folder"):
        read_note(note, max_bytes=1_000_000)


def test_a_non_utf8_file_name_is_a_reported_failure_the_tables_can_store(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "fine.md").write_text("# Fine\n")
    name = os.fsdecode(b"caf\xe9-\xff.md")  # Latin-1 bytes: surrogates in Python
    (vault / name).write_text("# Latin-1 name\n")
    (vault / os.fsdecode(b"dir-\xff")).mkdir()
    (vault / os.fsdecode(b"dir-\xff") / "inside.md").write_text("# Inside\n")
    scan = scan_vault(vault)
    assert [f.path for f in scan.notes] == ["fine.md"]
    assert {p.path: p.reason for p in scan.problems} == {
        "caf\\xe9-\\xff.md": NOT_UTF8_NAME, "dir-\\xff": NOT_UTF8_NAME}
    plan = plan_ingest("v", scan, StoredNotes.none(), max_note_bytes=1_000_000)
    with duckdb.connect() as conn:  # the rows reach DuckDB without a UnicodeEncodeError
        tables.ensure_schema(conn, registry.declared_tables())
        write_plan(conn, plan)
        assert sorted(conn.execute("SELECT path FROM ingest_failures").fetchall()) == [
            ("caf\\xe9-\\xff.md",), ("dir-\\xff",)]


def test_ticket_export_symlinks_out_are_reported_and_never_parsed(tmp_path, outside):
    export = tmp_path / "tickets"
    export.mkdir()
    (export / "LUM-2.json").write_text(json.dumps({**ISSUE, "key": "LUM-2",
                                                   "fields": {"summary": "Kept"}}))
    os.symlink(outside / "secret.json", export / "LUM-1.json")
    os.symlink(outside, export / "linked")
    (export / os.fsdecode(b"LUM-\xff.json")).write_text(json.dumps(ISSUE))
    assert [relative for _, relative in ticket_files(export)] == ["LUM-2.json"]
    result = read_ticket_set(export, "t")
    assert list(result.tickets) == ["LUM-2"]
    assert dict(result.failures) == {"LUM-1.json": OUTSIDE_SOURCE,
                                     "LUM-\\xff.json": NOT_UTF8_NAME}
    assert SECRET not in json.dumps(result.tickets, default=str)


def test_mail_and_confluence_listings_skip_symlinks_out(tmp_path, outside):
    mail = tmp_path / "mail"
    mail.mkdir()
    (mail / "ok.eml").write_text("From: a@b\nSubject: hi\n\nbody\n")
    (outside / "secret.eml").write_text(f"From: a@b\nSubject: s\n\n{SECRET}\n")
    os.symlink(outside / "secret.eml", mail / "leak.eml")
    assert [relative for _, relative, _ in mail_files(mail)] == ["ok.eml"]
    space = tmp_path / "space"
    space.mkdir()
    (space / "page.json").write_text("{}")
    os.symlink(outside / "secret.json", space / "leak.json")
    assert [path.name for path in confluence_files(space)] == ["page.json"]


def test_export_listings_for_the_sensors_drop_symlinks_out(tmp_path, outside):
    export = tmp_path / "tickets"
    export.mkdir()
    (export / "a.json").write_text("{}")
    os.symlink(outside / "secret.json", export / "b.json")

    def everything(root: Path):  # a listing that does not filter itself
        return [(path, path.name) for path in sorted(root.iterdir())]

    assert [relative for _, relative in export_files(export, everything)] == ["a.json"]
