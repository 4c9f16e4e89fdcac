"""Requests a refresh of a vault when its notes really changed, and only then.

A tick costs one stat walk per vault: its listing is reduced to a digest kept in the cursor,
so an unchanged vault needs no file read and no database. When the digest moves, the vault
is compared with the published serving version (jarvis_core.sources.changes) and only files
whose size or mtime differ are hashed: a touched but identical note requests no run.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb

from jarvis_assets import jobs
from jarvis_core.sources.changes import listing_digest, vault_changes
from jarvis_core.sources.vault.scan import VaultScan, scan_existing_vault
from jarvis_resources import JarvisConfigResource
from sensors.common import first_run_requested, read_cursor, registered_sources, write_cursor


def change_request(instance: dg.DagsterInstance, source: str, scan: VaultScan, digest: str,
                   data_dir: Path, first_sight: bool) -> dg.RunRequest | None:
    """A run for a vault whose listing moved, when its notes really changed or when nothing
    of it is published to compare with (unless this is the first look at a source whose
    registration run already covers it)."""
    changes = vault_changes(source, scan, data_dir)
    if changes is None:
        if first_sight and first_run_requested(instance, source):
            return None
        return dg.RunRequest(partition_key=source, run_key=digest,
                             tags={"jarvis/reason": "nothing published yet"})
    if not changes:
        return None
    return dg.RunRequest(partition_key=source, run_key=digest,
                         tags={"jarvis/reason": "vault changed", **changes.tags()})


@dg.sensor(
    job=jobs.refresh_sources_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Refreshes a vault's partition when notes were added, changed, deleted or "
                "renamed, or an attachment was added or removed (by content: a touched but "
                "identical note requests nothing). The run's tags count the changes and "
                "list the changed paths.",
)
def vault_changes_sensor(context: dg.SensorEvaluationContext,
                         jarvis: JarvisConfigResource) -> dg.SensorResult:
    """Refreshes a registered vault's partition when its notes changed. The cursor holds one
    listing digest per vault; with none, the vault is compared with the published version."""
    config = jarvis.load()
    previous: dict[str, str] = read_cursor(context).get("digests", {})
    digests: dict[str, str] = {}
    run_requests = []
    for source in registered_sources(context.instance, list(config.vaults)):
        try:
            vault = config.vaults[source]
            scan = scan_existing_vault(vault.path, vault.exclude)
            digest = listing_digest(source, scan)
            if digest != previous.get(source):
                request = change_request(context.instance, source, scan, digest,
                                         config.data_dir, first_sight=source not in previous)
                if request is not None:
                    run_requests.append(request)
            digests[source] = digest
        except (OSError, duckdb.Error) as exc:
            context.log.error(f"vault {source!r} not checked for changes: {exc}")
            if source in previous:
                digests[source] = previous[source]
    return dg.SensorResult(run_requests=run_requests,
                           cursor=write_cursor({"digests": digests}))
