"""Periodic full refresh, a safety net behind the change sensors."""

import dagster as dg

from jarvis_assets.jobs import refresh_sources_job
from jarvis_assets.partitions import source_partitions


@dg.schedule(job=refresh_sources_job, cron_schedule="0 3 * * *",
             default_status=dg.DefaultScheduleStatus.RUNNING)
def nightly_refresh_schedule(context: dg.ScheduleEvaluationContext):
    """One run per registered source each night; unchanged items cost a stat each."""
    for name in context.instance.get_dynamic_partitions(source_partitions.name):
        yield dg.RunRequest(partition_key=name,
                            run_key=f"nightly-{name}-{context.scheduled_execution_time:%Y%m%d}")
