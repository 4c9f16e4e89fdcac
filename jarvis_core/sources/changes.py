"""What changed in a source since the published serving version: the checks behind the
freshness sensors, as plain functions.

Every check has two steps. A stat step reduces a source to something small a sensor keeps
between ticks (a vault's or an export's listing digest, a repository's head), so an
unchanged source costs a stat walk and no database. Only when that moved is the source
compared with the published serving version — an immutable DuckDB file opened read-only, so
a check never contends with a refresh for a lock — by content: a touched but identical file
is no change. ``None`` from a comparison means nothing of the source is published yet.

Export sources (ticket sets now; mail and Confluence exports next) share one path: a listing
function names the export's files, and the published version records the sha256 of each
file's bytes in a table with ``(source, path, file_hash)`` columns (``path`` relative to the
source; the empty path is reserved for the settings row a writer may keep there).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from jarvis_core.config import JarvisConfig
from jarvis_core.sources.confinement import leaves, real_root
from jarvis_core.sources.repo.git import open_repository, remote_head, resolve_head
from jarvis_core.sources.tickets.fields import UNREADABLE
from jarvis_core.sources.vault.scan import VaultScan
from jarvis_core.stores.serving import NotPublished, current_version

MAX_PATHS_TAG_CHARS = 2_000

# (file, path relative to the source, ...) of every file of an export, sorted; extra items
# per entry (say, a mail file's kind) are ignored.
ListFiles = Callable[[Path], Iterable[tuple]]


def published_tables(data_dir: Path) -> Path | None:
    """The current serving version's DuckDB file; None when nothing is published yet."""
    try:
        return current_version(data_dir).tables_path
    except NotPublished:
        return None


_open: dict[Path, duckdb.DuckDBPyConnection] = {}
_open_lock = threading.Lock()


def published_cursor(tables_path: Path) -> duckdb.DuckDBPyConnection:
    """A cursor on a published (immutable) tables file. The file stays open between calls, so
    checking many sources costs one open; opening another version closes the last."""
    with _open_lock:
        if tables_path not in _open:
            for old in _open.values():
                old.close()
            _open.clear()
            _open[tables_path] = duckdb.connect(str(tables_path), read_only=True)
        return _open[tables_path].cursor()


def published_rows(data_dir: Path, sql: str, params: list) -> list[tuple] | None:
    """Rows of the current serving version; None when nothing (or no such table) is
    published yet."""
    tables_path = published_tables(data_dir)
    if tables_path is None:
        return None
    with published_cursor(tables_path) as conn:
        try:
            return conn.execute(sql, params).fetchall()
        except duckdb.CatalogException:  # published by a release without that table
            return None


def truncated_list(items: list[str], limit: int = MAX_PATHS_TAG_CHARS) -> str:
    """Comma-joined items, cut at a whole item with a count of the rest, so a run tag stays
    within ``limit`` characters however many files changed."""
    text = ", ".join(items)
    if len(text) <= limit:
        return text
    kept: list[str] = []
    for index, item in enumerate(items):
        suffix = f", ... (+{len(items) - index} more)"
        if len(", ".join([*kept, item])) + len(suffix) > limit:
            return ", ".join(kept) + suffix if kept else suffix.removeprefix(", ")
        kept.append(item)
    return text


def content_hash(path: Path) -> str | None:
    """sha256 of the bytes, read in blocks (as the raw assets record it); None when the file
    cannot be read (the refresh then records why)."""
    try:
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


# --- vaults ------------------------------------------------------------------------------

@dataclass
class VaultChanges:
    """What differs between a vault on disk and its published rows, by vault-relative path.

    Attachments count only when added or removed: link resolution (broken links, embeds)
    depends on which attachments exist, while nothing downstream reads their bytes."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    attachments_added: list[str] = field(default_factory=list)
    attachments_removed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return any((self.added, self.changed, self.deleted, self.renamed,
                    self.attachments_added, self.attachments_removed))

    def tags(self) -> dict[str, str]:
        """Run tags: a count per kind of change and the changed paths (truncated)."""
        paths = [*self.added, *self.changed, *self.deleted,
                 *(f"{old} -> {new}" for old, new in self.renamed),
                 *self.attachments_added, *self.attachments_removed]
        return {"jarvis/added": str(len(self.added)), "jarvis/changed": str(len(self.changed)),
                "jarvis/deleted": str(len(self.deleted)), "jarvis/renamed": str(len(self.renamed)),
                "jarvis/attachments_added": str(len(self.attachments_added)),
                "jarvis/attachments_removed": str(len(self.attachments_removed)),
                "jarvis/changed_paths": truncated_list(paths)}


@dataclass(frozen=True)
class PublishedVault:
    """A vault's rows in a serving version: notes (path -> size, mtime, hash), notes that
    failed as they were (path, size, mtime) and attachment paths."""

    notes: dict[str, tuple[int, int, str]]
    failures: set[tuple[str, int, int]]
    attachments: set[str]

    def __bool__(self) -> bool:
        return bool(self.notes or self.failures or self.attachments)


def listing_digest(source: str, scan: VaultScan) -> str:
    """sha256 of the source name and its sorted (path, size, mtime) listing; the name keeps
    two vaults with equal listings (say, both empty) from sharing a run key."""
    digest = hashlib.sha256(source.encode())
    for file in sorted(scan.files, key=lambda f: f.path):
        digest.update(f"\0{file.path}\0{file.size_bytes}\0{file.mtime_ns}".encode())
    return digest.hexdigest()


def read_published_vault(tables_path: Path, source: str) -> PublishedVault:
    with published_cursor(tables_path) as conn:
        notes = {path: (size, mtime, digest) for path, size, mtime, digest in conn.execute(
            "SELECT path, size_bytes, mtime_ns, content_hash FROM notes WHERE source = ?",
            [source]).fetchall()}
        failures = set(conn.execute(
            "SELECT path, size_bytes, mtime_ns FROM ingest_failures WHERE source = ?",
            [source]).fetchall())
        attachments = {path for (path,) in conn.execute(
            "SELECT path FROM attachments WHERE source = ?", [source]).fetchall()}
    return PublishedVault(notes, failures, attachments)


def vault_diff(scan: VaultScan, published: PublishedVault) -> VaultChanges:
    """Notes added, changed, deleted or renamed; only files whose size or mtime differ from
    their published row are read. A new note whose bytes equal a vanished one's is a rename;
    a new file that failed before exactly as it is now is no change."""
    changes = VaultChanges()
    added_hashes: dict[str, str | None] = {}
    for note in scan.notes:
        row = published.notes.get(note.path)
        if row is None:
            if (note.path, note.size_bytes, note.mtime_ns) not in published.failures:
                added_hashes[note.path] = content_hash(note.absolute_path)
        elif row[:2] != (note.size_bytes, note.mtime_ns) and \
                content_hash(note.absolute_path) != row[2]:
            changes.changed.append(note.path)

    on_disk = {note.path for note in scan.notes}
    added_by_hash: dict[str, list[str]] = {}
    for path, digest in added_hashes.items():
        if digest is not None:
            added_by_hash.setdefault(digest, []).append(path)
    for path in sorted(set(published.notes) - on_disk):
        candidates = added_by_hash.get(published.notes[path][2]) or []
        if candidates:
            new_path = candidates.pop(0)
            del added_hashes[new_path]
            changes.renamed.append((path, new_path))
        else:
            changes.deleted.append(path)
    changes.added = sorted(added_hashes)

    attachments = {file.path for file in scan.attachments}
    changes.attachments_added = sorted(attachments - published.attachments)
    changes.attachments_removed = sorted(published.attachments - attachments)
    return changes


def compare_with_published(source: str, scan: VaultScan, tables_path: Path) -> VaultChanges:
    """What differs between the scan and the vault's rows in the serving version at
    ``tables_path``."""
    return vault_diff(scan, read_published_vault(tables_path, source))


def vault_changes(source: str, scan: VaultScan, data_dir: Path) -> VaultChanges | None:
    """What differs from the current serving version; None when it holds nothing of the
    vault (nothing published yet, or the vault is newer than the version)."""
    tables_path = published_tables(data_dir)
    if tables_path is None:
        return None
    published = read_published_vault(tables_path, source)
    return vault_diff(scan, published) if published else None


# --- repositories ------------------------------------------------------------------------

def repository_head(config: JarvisConfig, source: str) -> str:
    """The commit the repository's configured branch names now: ``git ls-remote`` for a
    ``url:`` repository (nothing is cloned to find out), else the local clone's ref."""
    repo = config.repos[source]
    if repo.url is not None:
        return remote_head(repo.url, repo.branch)
    return resolve_head(open_repository(repo.path), repo.branch)


def published_head(data_dir: Path, source: str) -> str | None:
    """The head last ingested and published for the repository; None when none is."""
    rows = published_rows(data_dir, "SELECT head FROM repo_state WHERE source = ?", [source])
    return rows[0][0] if rows else None


# --- file-based exports ------------------------------------------------------------------

def export_files(root: Path, list_files: ListFiles) -> list[tuple[Path, str]]:
    """(file, relative path) of every file of the export at ``root``; a missing export is an
    error rather than an empty listing (which would read as every file removed). A file
    whose real path leaves the export's folder is never listed, so never read."""
    if not root.exists():
        raise FileNotFoundError(f"export does not exist: {root}")
    inside = real_root(root)
    return [(entry[0], entry[1]) for entry in list_files(root) if not leaves(inside, entry[0])]


def stat_digest(source: str, files: Iterable[tuple[Path, str]]) -> str:
    """sha256 of the source name and the (path, size, mtime) of each file."""
    digest = hashlib.sha256(source.encode())
    for file, relative in sorted(files, key=lambda entry: entry[1]):
        stat = file.stat()
        digest.update(f"\0{relative}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def file_hashes(files: Iterable[tuple[Path, str]]) -> dict[str, str]:
    """Relative path -> sha256 of the file's bytes (``UNREADABLE`` for a file that cannot
    be read), as export writers record them."""
    return {relative: content_hash(file) or UNREADABLE for file, relative in files}


def changed_paths(before: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """Paths added, removed or with another hash, sorted."""
    return sorted(path for path in before.keys() | now.keys() if before.get(path) != now.get(path))


def published_file_hashes(data_dir: Path, files_table: str, source: str
                          ) -> dict[str, str] | None:
    """Relative path -> file hash the current serving version recorded for the export;
    None when it holds nothing of the source (or has no such table)."""
    if not files_table.isidentifier():
        raise ValueError(f"not a table name: {files_table!r}")
    rows = published_rows(data_dir, f"SELECT path, file_hash FROM {files_table} "
                                    "WHERE source = ? AND path <> ''", [source])
    return dict(rows) if rows else None


def changed_export_files(source: str, files: list[tuple[Path, str]], data_dir: Path,
                         files_table: str) -> list[str] | None:
    """Export files added, changed or removed since the published version, by content;
    None when nothing of the source is published. Meant for when the stat digest moved:
    it reads every file."""
    before = published_file_hashes(data_dir, files_table, source)
    if before is None:
        return None
    return changed_paths(before, file_hashes(files))
