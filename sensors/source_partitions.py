"""Source partitions follow the configuration: every configured source is a partition of the
layers after ingestion and of its kind's raw asset, and a source dropped from the
configuration has its data purged before its partitions go."""

from __future__ import annotations

import dagster as dg

from jarvis_assets.partitions import kind_partitions, source_partitions
from jarvis_core.sources.kind import SourceKind
from jarvis_resources import JarvisConfigResource
from sensors.common import NEW_SOURCE, read_cursor, runs_in_flight, write_cursor

NO_LONGER_CONFIGURED = "source no longer configured"
CONFIGURED_AGAIN = "source configured again"


def purge_request(instance: dg.DagsterInstance, source: str, kind: SourceKind) -> dg.RunRequest:
    """The ingestion of a source that is no longer configured, which removes its rows (and,
    the later layers following, everything built from them). The run key counts the
    source's earlier purge runs, so a source removed, added again and removed again is
    purged again (a key Dagster has seen is skipped)."""
    earlier = instance.get_runs_count(filters=dg.RunsFilter(tags={
        "dagster/partition": source, "jarvis/reason": NO_LONGER_CONFIGURED}))
    return dg.RunRequest(partition_key=source, job_name=kind.ingest_job,
                         run_key=f"purge-{source}-{earlier + 1}",
                         tags={"jarvis/reason": NO_LONGER_CONFIGURED})


def source_partitions_sensor(kinds: tuple[SourceKind, ...],
                             ingest_jobs: list) -> dg.SensorDefinition:
    """The sensor keeping the partitions of every kind in step with the configuration
    (``ingest_jobs``: each kind's ingest job, which its requests run)."""

    @dg.sensor(
        name="source_partitions_sensor",
        jobs=ingest_jobs,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Keeps one partition per configured source (in the layers after "
                    "ingestion and in its kind's raw asset): registers a new source and "
                    "requests its first ingestion; for a source dropped from the "
                    "configuration, requests the ingestion that purges its data, then deletes "
                    "its partitions once no run for it is queued or running.",
    )
    def partitions_sensor(context: dg.SensorEvaluationContext,
                          jarvis: JarvisConfigResource) -> dg.SensorResult:
        """The cursor holds the dropped sources whose purge was requested."""
        config = jarvis.load()
        purging: list[str] = read_cursor(context).get("purging", [])
        run_requests, partition_requests, still_purging = [], [], []
        for kind in kinds:
            partitions = kind_partitions(kind)
            configured = set(config.sources_of(kind.name))
            known = set(context.instance.get_dynamic_partitions(partitions.name))
            new_sources = sorted(configured - known)
            if new_sources:
                partition_requests.append(partitions.build_add_request(new_sources))
            # no run key: a source added again later must get a first run again; one added
            # back before its partition went may have lost its data to the purge: read again
            run_requests += [
                dg.RunRequest(partition_key=source, job_name=kind.ingest_job,
                              tags={"jarvis/reason": reason})
                for reason, sources in ((NEW_SOURCE, new_sources),
                                        (CONFIGURED_AGAIN, sorted(configured & set(purging))))
                for source in sources]
            for source in sorted(known - configured):
                if source not in purging:
                    run_requests.append(purge_request(context.instance, source, kind))
                    still_purging.append(source)
                elif runs_in_flight(context.instance, source):  # deleting could strand it
                    still_purging.append(source)
                else:
                    partition_requests.append(partitions.build_delete_request([source]))
        configured = set(config.source_names)
        known = set(context.instance.get_dynamic_partitions(source_partitions.name))
        if added := sorted(configured - known):
            partition_requests.append(source_partitions.build_add_request(added))
        if gone := sorted(known - configured - set(still_purging)):
            partition_requests.append(source_partitions.build_delete_request(gone))
        return dg.SensorResult(run_requests=run_requests,
                               dynamic_partitions_requests=partition_requests,
                               cursor=write_cursor({"purging": still_purging}))

    return partitions_sensor
