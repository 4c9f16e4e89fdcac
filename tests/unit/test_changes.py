"""Change detection behind the freshness sensors: listing digests, what differs from the
published version by content, repository heads and export files (no Dagster)."""

import hashlib
import os
import subprocess
from pathlib import Path

import duckdb
import pytest

from jarvis_core.config import config_from_mapping
from jarvis_core.sources import registry
from jarvis_core.sources.changes import (
    UNREADABLE,
    changed_export_files,
    changed_paths,
    export_files,
    file_hashes,
    published_file_hashes,
    stat_digest,
    truncated_list,
)
from jarvis_core.sources.listings import ticket_files
from jarvis_core.sources.repo.changes import published_head, repository_head
from jarvis_core.sources.vault.changes import (
    PublishedVault,
    compare_with_published,
    listing_digest,
    vault_changes,
    vault_diff,
)
from jarvis_core.sources.vault.scan import scan_existing_vault
from jarvis_core.stores import serving

NOTE = "Inbox/Capture.md"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def vault(tmp_path) -> Path:
    root = tmp_path / "vault"
    for relative, text in {NOTE: "# Capture\n\nA reed switch.\n", "Plan.md": "# Plan\n",
                           "Attachments/wiring.csv": "a,b\n"}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def published_state(root: Path) -> PublishedVault:
    """The rows a refresh records for the vault as it is now."""
    scan = scan_existing_vault(root)
    return PublishedVault(
        notes={f.path: (f.size_bytes, f.mtime_ns, sha256(f.absolute_path)) for f in scan.notes},
        failures=set(), attachments={f.path for f in scan.attachments})


def diff(root: Path, published: PublishedVault):
    return vault_diff(scan_existing_vault(root), published)


PUBLISHED = ("notes", "attachments", "ingest_failures", "repo_state", "ticket_files")


def publish(data_dir: Path, rows: dict[str, list[dict]]) -> Path:
    """A serving version whose change-detection tables hold ``rows`` (table -> rows); its
    tables file."""
    name, staging = serving.begin_version(data_dir)
    with duckdb.connect() as conn:
        for table in PUBLISHED:
            conn.execute(registry.table(table).create_sql())
        for table, table_rows in rows.items():
            for row in table_rows:
                conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES "
                             f"({', '.join('?' * len(row))})", list(row.values()))
        serving.copy_tables(conn, staging, {table: registry.published_tables()[table]
                                            for table in PUBLISHED})
    return serving.commit_version(data_dir, name, staging, {}).tables_path


def touch(path: Path, seconds: int = 5) -> None:
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 10**9))


# --- run tags -------------------------------------------------------------------------------

def test_changed_paths_tag_is_truncated():
    paths = [f"folder/note {i}.md" for i in range(500)]
    text = truncated_list(paths, 2_000)
    assert len(text) <= 2_000 and text.startswith("folder/note 0.md, ")
    assert text.endswith("more)")
    assert truncated_list(["a.md", "b.md"], 2_000) == "a.md, b.md"


# --- vaults ---------------------------------------------------------------------------------

def test_listing_digest_moves_with_a_touch_and_differs_between_sources(vault):
    before = listing_digest("notes", scan_existing_vault(vault))
    assert listing_digest("notes", scan_existing_vault(vault)) == before
    assert listing_digest("other", scan_existing_vault(vault)) != before
    touch(vault / NOTE)
    assert listing_digest("notes", scan_existing_vault(vault)) != before


def test_unchanged_and_touched_notes_are_no_change(vault):
    published = published_state(vault)
    assert not diff(vault, published)
    touch(vault / NOTE)
    assert not diff(vault, published)


def test_each_kind_of_note_change(vault):
    published = published_state(vault)
    (vault / "Fresh.md").write_text("# Fresh\n")
    with (vault / "Plan.md").open("a") as handle:
        handle.write("More.\n")
    (vault / NOTE).rename(vault / "Inbox" / "Captured.md")
    changes = diff(vault, published)
    assert (changes.added, changes.changed, changes.deleted, changes.renamed) == (
        ["Fresh.md"], ["Plan.md"], [], [(NOTE, "Inbox/Captured.md")])
    assert changes.tags()["jarvis/changed_paths"] == (
        f"Fresh.md, Plan.md, {NOTE} -> Inbox/Captured.md")
    (vault / "Inbox" / "Captured.md").unlink()
    assert diff(vault, published).deleted == [NOTE]


def test_attachments_count_only_when_added_or_removed(vault):
    published = published_state(vault)
    (vault / "Attachments" / "wiring.csv").write_text("a,b\n1,2\n")
    assert not diff(vault, published)
    (vault / "Attachments" / "photo.png").write_bytes(b"\x89PNG")
    (vault / "Attachments" / "wiring.csv").unlink()
    changes = diff(vault, published)
    assert (changes.attachments_added, changes.attachments_removed) == (
        ["Attachments/photo.png"], ["Attachments/wiring.csv"])
    assert changes.tags()["jarvis/attachments_added"] == "1"


def test_a_note_that_failed_as_it_is_is_no_change(vault):
    broken = vault / "Broken.md"
    broken.write_bytes(b"\xff\xfe\x00")
    published = published_state(vault)
    stat = broken.stat()
    published.notes.pop("Broken.md")
    published.failures.add(("Broken.md", stat.st_size, stat.st_mtime_ns))
    assert not diff(vault, published)
    broken.write_text("# Fixed\n")
    assert diff(vault, published).added == ["Broken.md"]


def test_vault_changes_read_the_published_version(tmp_path, vault):
    data_dir = tmp_path / "data"
    scan = scan_existing_vault(vault)
    assert vault_changes("notes", scan, data_dir) is None  # nothing published
    state = published_state(vault)
    tables_path = publish(data_dir, {
        "notes": [{"source": "notes", "path": path, "size_bytes": size, "mtime_ns": mtime,
                   "content_hash": digest} for path, (size, mtime, digest) in state.notes.items()],
        "attachments": [{"source": "notes", "path": path} for path in state.attachments]})
    assert vault_changes("other", scan, data_dir) is None  # not in the published version
    assert not vault_changes("notes", scan, data_dir)
    (vault / "Plan.md").unlink()
    after = scan_existing_vault(vault)
    assert vault_changes("notes", after, data_dir).deleted == ["Plan.md"]
    assert compare_with_published("notes", after, tables_path).deleted == ["Plan.md"]


# --- repositories ---------------------------------------------------------------------------

def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Dana", "GIT_AUTHOR_EMAIL": "dana@example.com",
           "GIT_COMMITTER_NAME": "Dana", "GIT_COMMITTER_EMAIL": "dana@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_repository_head_local_and_by_url_and_published(tmp_path):
    repo = tmp_path / "code"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# Code\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "Start")
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "bundle", "create", "-q", str(tmp_path / "code.bundle"), "--all")
    config = config_from_mapping({"repos": {
        "local": str(repo), "remote": {"url": str(tmp_path / "code.bundle"), "branch": "main"}}},
        base_dir=tmp_path)
    heads = {repository_head(config.sources[name]) for name in ("local", "remote")}
    assert heads == {head}

    assert published_head(config.data_dir, "local") is None
    publish(config.data_dir, {"repo_state": [{"source": "local", "head": head}]})
    assert published_head(config.data_dir, "local") == head
    assert published_head(config.data_dir, "remote") is None


# --- exports --------------------------------------------------------------------------------

@pytest.fixture
def export(tmp_path) -> Path:
    root = tmp_path / "issues"
    (root / "nested").mkdir(parents=True)
    (root / "issues.json").write_text('[{"number": 1}]')
    (root / "nested" / "more.json").write_text("[]")
    (root / ".hidden.json").write_text("[]")
    return root


def test_export_files_and_their_digest(export, tmp_path):
    files = export_files(export, ticket_files)
    assert [relative for _, relative in files] == ["issues.json", "nested/more.json"]
    assert export_files(export, lambda root: ((f, r, "kind") for f, r in ticket_files(root))
                        ) == files  # extra items per entry (a mail file's kind) are ignored
    digest = stat_digest("issues", files)
    assert stat_digest("issues", reversed(files)) == digest
    assert stat_digest("other", files) != digest
    touch(export / "issues.json")
    assert stat_digest("issues", files) != digest
    with pytest.raises(FileNotFoundError, match=f"export does not exist: {tmp_path / 'gone'}"):
        export_files(tmp_path / "gone", ticket_files)


def test_file_hashes_mark_unreadable_files(export):
    files = export_files(export, ticket_files)
    assert file_hashes(files)["issues.json"] == sha256(export / "issues.json")
    (export / "nested" / "more.json").unlink()
    (export / "nested" / "more.json").mkdir()  # listed, cannot be read as a file
    assert file_hashes(files)["nested/more.json"] == UNREADABLE


def test_changed_paths_by_hash():
    assert changed_paths({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "9", "d": "4"}) == [
        "b", "c", "d"]


def test_changed_export_files_compare_content_with_the_published_version(tmp_path, export):
    data_dir = tmp_path / "data"
    files = export_files(export, ticket_files)
    assert changed_export_files("issues", files, data_dir, "ticket_files") is None
    publish(data_dir, {"ticket_files": [
        {"source": "issues", "path": relative, "file_hash": digest}
        for relative, digest in file_hashes(files).items()]
        + [{"source": "issues", "path": "", "file_hash": "settings"}]})
    assert published_file_hashes(data_dir, "ticket_files", "issues") == file_hashes(files)
    assert changed_export_files("other", files, data_dir, "ticket_files") is None
    assert changed_export_files("issues", files, data_dir, "mail_files") is None  # no table

    (export / "issues.json").write_bytes((export / "issues.json").read_bytes())
    touch(export / "issues.json")
    assert changed_export_files("issues", files, data_dir, "ticket_files") == []
    (export / "issues.json").write_text('[{"number": 2}]')
    (export / "nested" / "more.json").unlink()
    (export / "new.json").write_text("[]")
    now = export_files(export, ticket_files)
    assert changed_export_files("issues", now, data_dir, "ticket_files") == [
        "issues.json", "nested/more.json", "new.json"]
    with pytest.raises(ValueError, match="not a table name"):
        published_file_hashes(data_dir, "ticket_files; DROP TABLE notes", "issues")
