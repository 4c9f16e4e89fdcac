"""What changed in a source since the published serving version: the checks behind the
freshness sensors, as plain functions.

Every check has two steps. A stat step reduces a source to something small a sensor keeps
between ticks (a vault's or an export's listing digest, a repository's head), so an
unchanged source costs a stat walk and no database. Only when that moved is the source
compared with the published serving version — an immutable DuckDB file opened read-only, so
a check never contends with a refresh for a lock — by content: a touched but identical file
is no change. ``None`` from a comparison means nothing of the source is published yet.

Here are the parts every kind shares, and the watch of export kinds (ticket sets, mail,
Confluence exports): a listing function names the export's files, and the published version
records the sha256 of each file's bytes in a table with ``(source, path, file_hash)``
columns (``path`` relative to the source; the empty path is reserved for the settings row a
writer may keep there). Vaults and repositories watch in their folders.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from jarvis_core.sources.confinement import leaves, real_root
from jarvis_core.sources.kind import Change, ChangeWatch, Look, SourceUnreachable

if TYPE_CHECKING:  # the descriptors import this module: duckdb only when a watch compares
    import duckdb

MAX_PATHS_TAG_CHARS = 2_000
UNREADABLE = "(unreadable)"  # the hash recorded for a file that cannot be read

# (file, path relative to the source, ...) of every file of an export, sorted; extra items
# per entry (say, a mail file's kind) are ignored.
ListFiles = Callable[[Path], Iterable[tuple]]


def published_tables(data_dir: Path) -> Path | None:
    """The current serving version's DuckDB file; None when nothing is published yet."""
    from jarvis_core.stores.serving import NotPublished, current_version

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
            import duckdb

            _open[tables_path] = duckdb.connect(str(tables_path), read_only=True)
        return _open[tables_path].cursor()


def published_rows(data_dir: Path, sql: str, params: list) -> list[tuple] | None:
    """Rows of the current serving version; None when nothing (or no such table) is
    published yet."""
    tables_path = published_tables(data_dir)
    if tables_path is None:
        return None
    import duckdb

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


def export_watch(list_files: ListFiles, files_table: str) -> ChangeWatch:
    """The change watch of an export kind: a stat digest of its files, then their hashes
    against those the published ``files_table`` recorded."""

    def look(source: str, settings) -> Look:
        try:
            files = export_files(settings.path, list_files)
            return Look(stat_digest(source, files), files)
        except OSError as exc:
            raise SourceUnreachable(str(exc)) from exc

    def compare(source: str, seen: Look, data_dir: Path) -> Change | None:
        changed = changed_export_files(source, seen.state, data_dir, files_table)
        if changed is None:
            return Change("not published yet", {"jarvis/changed_paths": "(all)"}, first=True)
        return Change(f"{len(changed)} export files changed",
                      {"jarvis/changed_paths": truncated_list(changed)}) if changed else None

    return ChangeWatch(look, compare)
