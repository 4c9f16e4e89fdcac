"""What changed in a vault since the published serving version: a listing digest for a
sensor's cursor, then the notes compared by content (jarvis_core/sources/changes.py says
how every kind's watch works)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from jarvis_core.sources.changes import (
    content_hash,
    published_cursor,
    published_tables,
    truncated_list,
)
from jarvis_core.sources.kind import Change, ChangeWatch, Look, SourceUnreachable
from jarvis_core.sources.vault.scan import VaultScan, VaultUnavailable, scan_existing_vault


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


def _look(source: str, settings) -> Look:
    try:
        scan = scan_existing_vault(settings.path, settings.exclude)
    except VaultUnavailable as exc:
        raise SourceUnreachable(str(exc)) from exc
    return Look(listing_digest(source, scan), scan)


def _compare(source: str, seen: Look, data_dir: Path) -> Change | None:
    changes = vault_changes(source, seen.state, data_dir)
    if changes is None:
        return Change("not published yet", first=True)
    if not changes:
        return None
    counts = {"added": len(changes.added), "changed": len(changes.changed),
              "deleted": len(changes.deleted), "renamed": len(changes.renamed)}
    moved = ", ".join(f"{count} {what}" for what, count in counts.items() if count)
    return Change(f"notes {moved or 'attachments changed'}", changes.tags())


WATCH = ChangeWatch(_look, _compare)
