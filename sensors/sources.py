"""Keeps the source partitions in step with the configuration file."""

import dagster as dg

from jarvis_assets.jobs import refresh_sources_job
from jarvis_assets.partitions import source_partitions
from jarvis_resources import JarvisConfigResource


@dg.sensor(job=refresh_sources_job, minimum_interval_seconds=60,
           default_status=dg.DefaultSensorStatus.RUNNING)
def source_partitions_sensor(context: dg.SensorEvaluationContext,
                             jarvis: JarvisConfigResource) -> dg.SensorResult:
    """Registers a partition for each newly configured source and requests its first run."""
    configured = set(jarvis.load().source_names)
    known = set(context.instance.get_dynamic_partitions(source_partitions.name))
    added = sorted(configured - known)
    return dg.SensorResult(
        run_requests=[dg.RunRequest(partition_key=name, run_key=f"new-source-{name}")
                      for name in added],
        dynamic_partitions_requests=[source_partitions.build_add_request(added)] if added else [],
    )
