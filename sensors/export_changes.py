"""Requests a refresh of a file-based export source (ticket sets, mail folders and files,
Confluence exports) when one of its files was added, changed or removed, and only then.

One factory makes the sensor of every such kind: a tick costs a stat walk per source (a
digest of its files' paths, sizes and mtimes kept in the cursor); only when that moved are
the files hashed and compared with the hashes the published version recorded, so a touched
but identical file requests nothing.
"""

from __future__ import annotations

import dagster as dg
import duckdb

from jarvis_assets import jobs
from jarvis_core.config import JarvisConfig
from jarvis_core.sources.changes import (
    ListFiles,
    changed_export_files,
    export_files,
    stat_digest,
    truncated_list,
)
from jarvis_core.sources.listings import confluence_files, mail_files, ticket_files
from jarvis_resources import JarvisConfigResource
from sensors.common import first_run_requested, read_cursor, registered_sources, write_cursor


def export_changes_sensor(name: str, section: str, list_files: ListFiles, *, files_table: str,
                          noun: str = "export", minimum_interval_seconds: int = 30
                          ) -> dg.SensorDefinition:
    """The change sensor of the sources in the configuration section ``section`` (each with
    a ``path``): ``list_files(root)`` yields (file, path relative to the source, ...) of an
    export's files, and the published table ``files_table`` holds (source, path, file_hash)
    with the sha256 of each file, as ``jarvis_core.sources.changes.file_hashes`` computes
    it. ``noun`` names one source in log lines ("ticket set")."""
    if section not in JarvisConfig.model_fields:
        raise ValueError(f"{name}: the configuration has no '{section}' section")

    @dg.sensor(
        name=name,
        job=jobs.refresh_sources_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Refreshes the partition of a source under '{section}:' when one of its "
                    "export files was added, changed or removed (by content: a touched but "
                    "identical file requests nothing). The run's tags list the changed files.",
    )
    def export_sensor(context: dg.SensorEvaluationContext,
                      jarvis: JarvisConfigResource) -> dg.SensorResult:
        """Refreshes a registered export source when its files' content changed. The cursor
        holds one stat digest per source; with none, the files are compared with the
        published version."""
        config = jarvis.load()
        sources = getattr(config, section)
        seen: dict[str, str] = read_cursor(context)
        digests: dict[str, str] = {}
        run_requests = []
        for source in registered_sources(context.instance, list(sources)):
            try:
                files = export_files(sources[source].path, list_files)
                digest = stat_digest(source, files)
                if digest != seen.get(source):
                    changed = changed_export_files(source, files, config.data_dir, files_table)
                    first_look_covered = (changed is None and source not in seen
                                          and first_run_requested(context.instance, source))
                    if (changed is None or changed) and not first_look_covered:
                        run_requests.append(dg.RunRequest(
                            partition_key=source, run_key=digest,
                            tags={"jarvis/reason": "export changed",
                                  "jarvis/changed_paths": truncated_list(changed)
                                  if changed else "(all)"}))
                digests[source] = digest
            except (OSError, ValueError, duckdb.Error) as exc:
                context.log.error(f"{noun} {source!r} not checked for changes: {exc}")
                if source in seen:
                    digests[source] = seen[source]
        return dg.SensorResult(run_requests=run_requests, cursor=write_cursor(digests))

    return export_sensor


ticket_exports_sensor = export_changes_sensor(
    "ticket_exports_sensor", "tickets", ticket_files, files_table="ticket_files",
    noun="ticket set")
mail_changes_sensor = export_changes_sensor(
    "mail_changes_sensor", "mail", mail_files, files_table="mail_files", noun="mail source")
confluence_exports_sensor = export_changes_sensor(
    "confluence_exports_sensor", "confluence", confluence_files, files_table="page_files",
    noun="Confluence export")
