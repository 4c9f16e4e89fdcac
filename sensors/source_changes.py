"""Requests the ingestion of a source when its content really changed, and only then: one
sensor per kind, made from the kind's change watch (jarvis_core/sources/kind.py).

A tick costs one cheap look per source (a stat walk, a remote head) reduced to a digest kept
in the cursor, so an unchanged source needs no file read and no database. When the digest
moves, the source is compared with the published serving version by content: a touched but
identical file requests nothing. The run is the kind's ingest job; every later layer
follows it by automation.
"""

from __future__ import annotations

import dagster as dg
import duckdb

from jarvis_core.sources.kind import SourceKind, SourceUnreachable
from jarvis_resources import JarvisConfigResource
from sensors.common import first_run_requested, read_cursor, registered_sources, write_cursor


def change_sensor(kind: SourceKind, ingest_job) -> dg.SensorDefinition:
    """The change sensor of the sources of ``kind``, requesting its ``ingest_job``."""

    @dg.sensor(
        name=f"{kind.name}_changes_sensor",
        job=ingest_job,
        minimum_interval_seconds=kind.watch.interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Ingests a source under '{kind.section}:' when its content changed "
                    "(compared by content with the published version, so a touched but "
                    "identical file requests nothing); the run's tags say what changed.",
    )
    def changes_sensor(context: dg.SensorEvaluationContext,
                       jarvis: JarvisConfigResource) -> dg.SensorResult:
        """The cursor holds one digest per source; with none, the source is compared with
        the published version."""
        config = jarvis.load()
        sources = config.sources_of(kind.name)
        seen: dict[str, str] = read_cursor(context)
        digests: dict[str, str] = {}
        run_requests = []
        for source in registered_sources(context.instance, kind, list(sources)):
            try:
                look = kind.watch.look(source, sources[source])
                if look.digest != seen.get(source):
                    change = kind.watch.compare(source, look, config.data_dir)
                    covered = (change is not None and change.first and source not in seen
                               and first_run_requested(context.instance, source))
                    if change is not None and not covered:
                        run_requests.append(dg.RunRequest(
                            partition_key=source, run_key=look.digest,
                            tags={"jarvis/reason": change.reason, **change.tags}))
                digests[source] = look.digest
            except (SourceUnreachable, OSError, ValueError, duckdb.Error) as exc:
                context.log.error(f"{kind.label} {source!r} not checked for changes: {exc}")
                if source in seen:
                    digests[source] = seen[source]
        return dg.SensorResult(run_requests=run_requests, cursor=write_cursor(digests))

    return changes_sensor
