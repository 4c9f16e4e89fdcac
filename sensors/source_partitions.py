"""Source partitions follow the configuration: every configured source of every kind is a
partition, and a source dropped from the configuration has its data purged before its
partition goes."""

from __future__ import annotations

import dagster as dg

from jarvis_assets import jobs
from jarvis_assets.partitions import source_partitions
from jarvis_resources import JarvisConfigResource
from sensors.common import NEW_SOURCE, read_cursor, runs_in_flight, write_cursor

NO_LONGER_CONFIGURED = "source no longer configured"
CONFIGURED_AGAIN = "source configured again"


def purge_request(instance: dg.DagsterInstance, source: str) -> dg.RunRequest:
    """A refresh of a source that is no longer configured, which removes its rows from
    every store. The run key counts the source's earlier purge runs, so a source removed,
    added again and removed again is purged again (a key Dagster has seen is skipped)."""
    earlier = instance.get_runs_count(filters=dg.RunsFilter(tags={
        "dagster/partition": source, "jarvis/reason": NO_LONGER_CONFIGURED}))
    return dg.RunRequest(partition_key=source, run_key=f"purge-{source}-{earlier + 1}",
                         tags={"jarvis/reason": NO_LONGER_CONFIGURED})


@dg.sensor(
    job=jobs.refresh_sources_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Keeps one partition per configured source (vaults, repositories, ticket "
                "sets): registers a new source and requests its first run; for a source "
                "dropped from the configuration, requests a run that purges its data, then "
                "deletes its partition once no run for it is queued or running.",
)
def source_partitions_sensor(context: dg.SensorEvaluationContext,
                             jarvis: JarvisConfigResource) -> dg.SensorResult:
    """Registers new sources (with their first run) and purges, then unregisters, dropped
    ones. The cursor holds the dropped sources whose purge was requested."""
    config = jarvis.load()
    cursor = read_cursor(context)
    purging: list[str] = cursor.get("purging", [])

    configured = set(config.source_names)
    known = set(context.instance.get_dynamic_partitions(source_partitions.name))
    new_sources = sorted(configured - known)
    # no run key: a source added again later must get a first run again
    run_requests = [dg.RunRequest(partition_key=source, tags={"jarvis/reason": NEW_SOURCE})
                    for source in new_sources]
    partition_requests = [source_partitions.build_add_request(new_sources)] if new_sources else []
    # added back before its partition went: its purge may have removed its data, so read it
    # again (no run key, as for a new source)
    run_requests += [dg.RunRequest(partition_key=source, tags={"jarvis/reason": CONFIGURED_AGAIN})
                     for source in sorted(configured & set(purging))]

    still_purging = []
    for source in sorted(known - configured):
        if source not in purging:
            run_requests.append(purge_request(context.instance, source))
            still_purging.append(source)
        elif runs_in_flight(context.instance, source):  # deleting it could strand the run
            still_purging.append(source)
        else:
            partition_requests.append(source_partitions.build_delete_request([source]))

    return dg.SensorResult(
        run_requests=run_requests, dynamic_partitions_requests=partition_requests,
        cursor=write_cursor({"purging": still_purging}))
