"""Requests a refresh of a vault when its notes really changed, and only then.

A tick costs one stat walk per vault: its listing is reduced to a digest kept in the cursor,
so an unchanged vault needs no file read and no database. When the digest moves, the scan is
compared with the published serving version (an immutable DuckDB file, opened read-only, so
the sensor never contends with a refresh for a lock) and only files whose size or mtime
differ are hashed: a touched but identical note requests no run.

Attachments: only an added or removed attachment path requests a run, because link
resolution (broken links, embeds) depends on which attachments exist; an edited attachment
does not, since nothing downstream reads its bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import duckdb

from jarvis_assets.jobs import refresh_sources_job
from jarvis_assets.partitions import source_partitions
from jarvis_core.sources.vault_scan import VaultScan, scan_existing_vault
from jarvis_core.stores.serving import NotPublished, current_version
from jarvis_resources import JarvisConfigResource

MAX_PATHS_TAG_CHARS = 2_000
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
             dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
             dg.DagsterRunStatus.CANCELING]


@dataclass
class VaultChanges:
    """What differs between a vault on disk and its published rows, by vault-relative path."""

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
        paths = [*self.added, *self.changed, *self.deleted,
                 *(f"{old} -> {new}" for old, new in self.renamed),
                 *self.attachments_added, *self.attachments_removed]
        return {"jarvis/added": str(len(self.added)), "jarvis/changed": str(len(self.changed)),
                "jarvis/deleted": str(len(self.deleted)), "jarvis/renamed": str(len(self.renamed)),
                "jarvis/attachments_added": str(len(self.attachments_added)),
                "jarvis/attachments_removed": str(len(self.attachments_removed)),
                "jarvis/changed_paths": truncated_list(paths, MAX_PATHS_TAG_CHARS)}


def truncated_list(items: list[str], limit: int) -> str:
    """Comma-joined items, cut at a whole item with a count of the rest, so the tag stays
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


def listing_digest(source: str, scan: VaultScan) -> str:
    """sha256 of the source name and its sorted (path, size, mtime) listing; the name keeps
    two vaults with equal listings (say, both empty) from sharing a run key."""
    digest = hashlib.sha256(source.encode())
    for file in sorted(scan.files, key=lambda f: f.path):
        digest.update(f"\0{file.path}\0{file.size_bytes}\0{file.mtime_ns}".encode())
    return digest.hexdigest()


def content_hash(path: Path) -> str | None:
    """sha256 of the bytes, as raw_notes records it; None when the file cannot be read
    (the refresh then records why)."""
    try:
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return None


def compare_with_published(source: str, scan: VaultScan, tables_path: Path) -> VaultChanges:
    """Notes added, changed, deleted or renamed since the published version; only files
    whose size or mtime differ from their published row are read."""
    with duckdb.connect(str(tables_path), read_only=True) as conn:
        published = {path: (size, mtime, digest) for path, size, mtime, digest in conn.execute(
            "SELECT path, size_bytes, mtime_ns, content_hash FROM notes WHERE source = ?",
            [source]).fetchall()}
        known_failures = {(path, size, mtime) for path, size, mtime in conn.execute(
            "SELECT path, size_bytes, mtime_ns FROM ingest_failures WHERE source = ?",
            [source]).fetchall()}
        published_attachments = {path for (path,) in conn.execute(
            "SELECT path FROM attachments WHERE source = ?", [source]).fetchall()}

    changes = VaultChanges()
    added_hashes: dict[str, str | None] = {}
    for note in scan.notes:
        row = published.get(note.path)
        if row is None:
            if (note.path, note.size_bytes, note.mtime_ns) not in known_failures:
                added_hashes[note.path] = content_hash(note.absolute_path)
        elif row[:2] != (note.size_bytes, note.mtime_ns) and \
                content_hash(note.absolute_path) != row[2]:
            changes.changed.append(note.path)

    on_disk = {note.path for note in scan.notes}
    added_by_hash: dict[str, list[str]] = {}
    for path, digest in added_hashes.items():
        if digest is not None:
            added_by_hash.setdefault(digest, []).append(path)
    for path in sorted(set(published) - on_disk):
        candidates = added_by_hash.get(published[path][2]) or []
        if candidates:
            new_path = candidates.pop(0)
            del added_hashes[new_path]
            changes.renamed.append((path, new_path))
        else:
            changes.deleted.append(path)
    changes.added = sorted(added_hashes)

    attachments = {file.path for file in scan.attachments}
    changes.attachments_added = sorted(attachments - published_attachments)
    changes.attachments_removed = sorted(published_attachments - attachments)
    return changes


def purge_in_flight(instance: dg.DagsterInstance, source: str) -> bool:
    """Whether a run for the partition is queued or running; deleting the partition under it
    could keep it from starting or finishing."""
    return bool(instance.get_runs(
        filters=dg.RunsFilter(tags={"dagster/partition": source}, statuses=IN_FLIGHT), limit=1))


def change_request(source: str, scan: VaultScan, digest: str,
                   data_dir: Path) -> dg.RunRequest | None:
    """A run for a vault whose listing moved, when its notes really changed or when nothing
    is published yet to compare with."""
    try:
        tables_path = current_version(data_dir).tables_path
    except NotPublished:
        return dg.RunRequest(partition_key=source, run_key=digest,
                             tags={"jarvis/reason": "nothing published yet"})
    changes = compare_with_published(source, scan, tables_path)
    if not changes:
        return None
    return dg.RunRequest(partition_key=source, run_key=digest,
                         tags={"jarvis/reason": "vault changed", **changes.tags()})


@dg.sensor(job=refresh_sources_job, minimum_interval_seconds=30,
           default_status=dg.DefaultSensorStatus.RUNNING)
def vault_changes_sensor(context: dg.SensorEvaluationContext,
                         jarvis: JarvisConfigResource) -> dg.SensorResult:
    """Refreshes a vault's partition when its notes changed; registers new vaults and purges
    the data of removed ones. The cursor holds one listing digest per vault and the removed
    vaults whose purge was requested."""
    config = jarvis.load()
    cursor = json.loads(context.cursor) if context.cursor else {}
    previous_digests: dict[str, str] = cursor.get("digests", {})
    purging: list[str] = cursor.get("purging", [])

    configured = set(config.vaults)
    every_kind = set(config.source_names)  # repos and ticket sets share the partitions
    known = set(context.instance.get_dynamic_partitions(source_partitions.name))
    new_sources = sorted(every_kind - known)
    run_requests = [dg.RunRequest(partition_key=source, tags={"jarvis/reason": "new source"})
                    for source in new_sources if source not in configured]
    partition_requests = [source_partitions.build_add_request(new_sources)] if new_sources else []
    digests: dict[str, str] = {}

    for source in sorted(configured):
        try:
            vault = config.vaults[source]
            scan = scan_existing_vault(vault.path, vault.exclude)
            digest = listing_digest(source, scan)
            if source in new_sources:  # no run key: a re-added vault's listing may repeat
                run_requests.append(dg.RunRequest(partition_key=source,
                                                  tags={"jarvis/reason": "new source"}))
            elif digest != previous_digests.get(source):
                request = change_request(source, scan, digest, config.data_dir)
                if request is not None:
                    run_requests.append(request)
            digests[source] = digest
        except (OSError, duckdb.Error) as exc:
            context.log.error(f"vault {source!r} not checked for changes: {exc}")
            if source in previous_digests:
                digests[source] = previous_digests[source]

    still_purging = []
    for source in sorted(known - every_kind):
        if source not in purging:
            last_digest = previous_digests.get(source)  # a re-added then removed vault differs
            run_requests.append(dg.RunRequest(
                partition_key=source,
                run_key=f"purge-{source}-{last_digest[:12]}" if last_digest else f"purge-{source}",
                tags={"jarvis/reason": "source no longer configured"}))
            still_purging.append(source)
        elif purge_in_flight(context.instance, source):
            still_purging.append(source)
        else:
            partition_requests.append(source_partitions.build_delete_request([source]))

    return dg.SensorResult(
        run_requests=run_requests, dynamic_partitions_requests=partition_requests,
        cursor=json.dumps({"digests": digests, "purging": still_purging}, sort_keys=True))
