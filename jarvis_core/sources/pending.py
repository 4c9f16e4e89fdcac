"""Which sources a refresh must run, decided against the published version without Dagster:
a refresh with nothing to do costs a stat walk per source and one small database read.

A source runs when nothing of it is published, when its content moved since (notes, a
repository head, an export file, by content), when the configuration changed (a
fingerprint of everything that shapes the layers is kept in each version's manifest), when
the published version is a partial one (embeddings still being made), or when it left the
configuration but still has published rows."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from jarvis_core.config import JarvisConfig
from jarvis_core.sources.changes import (
    ListFiles,
    changed_export_files,
    export_files,
    published_head,
    published_rows,
    repository_head,
    vault_changes,
)
from jarvis_core.sources.listings import confluence_files, mail_files, ticket_files
from jarvis_core.sources.repo.git import GitError
from jarvis_core.sources.vault.scan import VaultUnavailable, scan_existing_vault
from jarvis_core.stores.serving import NotPublished, current_version
from jarvis_core.stores.tables import RAW_TABLES

# Export kinds: configuration section -> (listing of its files, published table of their
# hashes).
EXPORT_SOURCES: dict[str, tuple[ListFiles, str]] = {
    "tickets": (ticket_files, "ticket_files"),
    "mail": (mail_files, "mail_files"),
    "confluence": (confluence_files, "page_files"),
}
_NOT_SHAPING = {"config_path", "schedules", "instance", "environment"}


def settings_fingerprint(config: JarvisConfig) -> str:
    """Everything in the configuration that shapes what the layers hold (sources and their
    settings, chunking, the model, graph, analytics, limits); schedules, the Dagster
    instance's storages and credentials do not."""
    shaping = config.model_dump(mode="json", exclude=_NOT_SHAPING)
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]


def _vault_reason(config: JarvisConfig, source: str) -> str | None:
    vault = config.vaults[source]
    changes = vault_changes(source, scan_existing_vault(vault.path, vault.exclude),
                            config.data_dir)
    if changes is None:
        return "not published yet"
    if not changes:
        return None
    counts = {"added": len(changes.added), "changed": len(changes.changed),
              "deleted": len(changes.deleted), "renamed": len(changes.renamed)}
    moved = ", ".join(f"{count} {what}" for what, count in counts.items() if count)
    return f"notes {moved or 'attachments changed'}"


def _repo_reason(config: JarvisConfig, source: str) -> str | None:
    published = published_head(config.data_dir, source)
    if published is None:
        return "not published yet"
    head = repository_head(config, source)
    return None if head == published else f"head moved to {head[:12]}"


def _export_reason(section: str) -> Callable[[JarvisConfig, str], str | None]:
    list_files, files_table = EXPORT_SOURCES[section]

    def reason(config: JarvisConfig, source: str) -> str | None:
        files = export_files(getattr(config, section)[source].path, list_files)
        changed = changed_export_files(source, files, config.data_dir, files_table)
        if changed is None:
            return "not published yet"
        return f"{len(changed)} export files changed" if changed else None

    return reason


_REASONS: dict[str, Callable[[JarvisConfig, str], str | None]] = {
    "vault": _vault_reason, "repo": _repo_reason,
    **{section: _export_reason(section) for section in EXPORT_SOURCES}}


def _published_sources(config: JarvisConfig) -> set[str]:
    """Sources with rows in the published raw tables (a table an older release did not
    publish counts as empty)."""
    return {source for table in RAW_TABLES
            for (source,) in published_rows(
                config.data_dir, f"SELECT DISTINCT source FROM {table}", []) or []}


def pending_sources(config: JarvisConfig) -> dict[str, str]:
    """Source -> why a refresh must run it; empty when the published version is current."""
    try:
        manifest = current_version(config.data_dir).manifest
    except NotPublished:
        return {source: "nothing published yet" for source in config.source_names}
    pending = {source: "no longer configured"
               for source in _published_sources(config) - set(config.source_names)}
    if manifest.get("settings") != settings_fingerprint(config):
        return pending | {source: "the configuration changed" for source in config.source_names}
    if not manifest.get("vectors_complete", True):
        return pending | {source: "embeddings still being made"
                          for source in config.source_names}
    for source in config.source_names:
        try:
            reason = _REASONS[config.source_kind(source)](config, source)
        except (OSError, VaultUnavailable, GitError, ValueError) as exc:
            reason = f"cannot be checked ({exc}): the run will say why"
        if reason:
            pending[source] = reason
    return pending
