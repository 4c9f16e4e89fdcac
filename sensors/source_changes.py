"""Requests a refresh of a repository when its head moved, and of a ticket set when its
export files changed — only then.

Like the vault sensor, each keeps a small cursor (a head per repository, a stat digest per
ticket set) and compares with the published serving version (read-only, never a lock a
refresh needs) when the cursor has nothing to go on or the digest moved. New sources are
registered, and their first run requested, by the vault sensor, which owns the partitions.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import duckdb

from jarvis_assets.jobs import refresh_sources_job
from jarvis_assets.partitions import source_partitions
from jarvis_core.config import JarvisConfig
from jarvis_core.sources.git import GitError, open_repository, remote_head, resolve_head
from jarvis_core.sources.tickets.export import export_file_hashes, ticket_files
from jarvis_core.sources.tickets.fields import TicketError
from jarvis_core.stores.serving import NotPublished, current_version
from jarvis_resources import JarvisConfigResource
from sensors.vault_changes import MAX_PATHS_TAG_CHARS, truncated_list


def published_rows(data_dir: Path, sql: str, params: list) -> list[tuple] | None:
    """Rows of the current serving version; None when nothing (or no such table) is
    published yet."""
    try:
        tables_path = current_version(data_dir).tables_path
    except NotPublished:
        return None
    with duckdb.connect(str(tables_path), read_only=True) as conn:
        try:
            return conn.execute(sql, params).fetchall()
        except duckdb.CatalogException:  # published by a release without that table
            return None


def repository_head(config: JarvisConfig, source: str) -> str:
    repo = config.repos[source]
    if repo.url is not None:
        return remote_head(repo.url, repo.branch)
    return resolve_head(open_repository(repo.path), repo.branch)


def _registered(context: dg.SensorEvaluationContext, names: list[str]) -> list[str]:
    known = set(context.instance.get_dynamic_partitions(source_partitions.name))
    return [name for name in sorted(names) if name in known]


@dg.sensor(job=refresh_sources_job, minimum_interval_seconds=60,
           default_status=dg.DefaultSensorStatus.RUNNING)
def repo_changes_sensor(context: dg.SensorEvaluationContext,
                        jarvis: JarvisConfigResource) -> dg.SensorResult:
    """Refreshes a repository's partition when its head (or configured branch) moved, a
    force-push included. The cursor holds the last head seen per repository."""
    config = jarvis.load()
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    heads: dict[str, str] = {}
    run_requests = []
    for source in _registered(context, list(config.repos)):
        try:
            head = repository_head(config, source)
        except GitError as exc:
            context.log.error(f"repository {source!r} not checked for changes: {exc}")
            if source in seen:
                heads[source] = seen[source]
            continue
        heads[source] = head
        previous = seen.get(source)
        if previous is None:  # no cursor yet: what was last ingested and published
            rows = published_rows(config.data_dir,
                                  "SELECT head FROM repo_state WHERE source = ?", [source])
            previous = rows[0][0] if rows else None
        if head != previous:
            run_requests.append(dg.RunRequest(
                partition_key=source, run_key=f"{source}-{head}",
                tags={"jarvis/reason": "repository head moved", "jarvis/head": head,
                      "jarvis/previous_head": previous or "(none)"}))
    return dg.SensorResult(run_requests=run_requests,
                           cursor=json.dumps(heads, sort_keys=True))


def export_digest(source: str, root: Path) -> str:
    """sha256 of the source name and the (path, size, mtime) listing of its export files."""
    if not root.exists():
        raise FileNotFoundError(f"ticket export does not exist: {root}")
    digest = hashlib.sha256(source.encode())
    for file, relative in ticket_files(root):
        stat = file.stat()
        digest.update(f"\0{relative}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def changed_exports(config: JarvisConfig, source: str) -> list[str] | None:
    """Export files added, changed or removed since the published version (None when nothing
    is published yet); only called when the stat digest moved."""
    published = published_rows(
        config.data_dir, "SELECT path, file_hash FROM ticket_files WHERE source = ? "
                         "AND path <> ''", [source])
    if published is None:
        return None
    before = dict(published)
    now = export_file_hashes(config.tickets[source].path)
    return sorted(path for path in before.keys() | now.keys()
                  if before.get(path) != now.get(path))


@dg.sensor(job=refresh_sources_job, minimum_interval_seconds=30,
           default_status=dg.DefaultSensorStatus.RUNNING)
def ticket_exports_sensor(context: dg.SensorEvaluationContext,
                          jarvis: JarvisConfigResource) -> dg.SensorResult:
    """Refreshes a ticket set's partition when an export file is new, changed or removed
    (by content: a touched but identical file requests nothing). The cursor holds one stat
    digest per ticket set."""
    config = jarvis.load()
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    digests: dict[str, str] = {}
    run_requests = []
    for source in _registered(context, list(config.tickets)):
        try:
            digest = export_digest(source, config.tickets[source].path)
            if digest != seen.get(source):
                changed = changed_exports(config, source)
                if changed is None or changed:
                    run_requests.append(dg.RunRequest(
                        partition_key=source, run_key=digest,
                        tags={"jarvis/reason": "ticket export changed",
                              "jarvis/changed_paths": truncated_list(
                                  changed, MAX_PATHS_TAG_CHARS) if changed else "(all)"}))
            digests[source] = digest
        except (OSError, TicketError, duckdb.Error) as exc:
            context.log.error(f"ticket set {source!r} not checked for changes: {exc}")
            if source in seen:
                digests[source] = seen[source]
    return dg.SensorResult(run_requests=run_requests,
                           cursor=json.dumps(digests, sort_keys=True))
