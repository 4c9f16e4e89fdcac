"""Periodic runs behind the change sensors: a nightly refresh of every source (a safety net
for changes a sensor cannot see) and a daily analytics snapshot (history for trends).

Cron expressions and timezones come from the configuration, so the schedules are built by a
function from it rather than defined at module level."""

import dagster as dg

from jarvis_assets import jobs
from jarvis_assets.partitions import source_partitions
from jarvis_core.config import ConfigError, JarvisConfig, ScheduleSettings
from schedules.memory_decay import memory_decay_schedule

# (schedules.<field> in the configuration, schedule name, job, description)
SCHEDULES = (
    ("refresh", "nightly_refresh", jobs.refresh_sources_job,
     "Refreshes every registered source, a safety net behind the change sensors; unchanged "
     "items cost a stat each."),
    ("analytics", "daily_analytics", jobs.analytics_snapshot_job,
     "Takes an analytics snapshot of every registered source, for the history of trends."),
)


def per_source_schedule(name: str, job, settings: ScheduleSettings,
                        description: str) -> dg.ScheduleDefinition:
    """One run per registered source at each tick; the run key makes a tick idempotent."""

    @dg.schedule(name=name, job=job, cron_schedule=settings.cron,
                 execution_timezone=settings.timezone, description=description,
                 default_status=dg.DefaultScheduleStatus.RUNNING)
    def per_source_runs(context: dg.ScheduleEvaluationContext):
        tick = context.scheduled_execution_time
        for source in context.instance.get_dynamic_partitions(source_partitions.name):
            yield dg.RunRequest(partition_key=source, run_key=f"{name}-{source}-{tick:%Y%m%d%H%M}",
                                tags={"jarvis/reason": f"schedule {name}"})

    return per_source_runs


def build_schedules(config: JarvisConfig) -> list[dg.ScheduleDefinition]:
    """The schedules (and the memory decay); a cron expression Dagster rejects is a
    configuration error naming ``schedules.<field>.cron``."""
    schedules = []
    for field, name, job, description in SCHEDULES:
        settings = getattr(config.schedules, field)
        try:
            schedules.append(per_source_schedule(name, job, settings, description))
        except dg.DagsterInvalidDefinitionError as exc:
            raise ConfigError(f"{config.config_path or 'configuration'}: schedules.{field}.cron: "
                              f"{settings.cron!r} is not a valid cron expression") from exc
    return [*schedules, memory_decay_schedule(config)]
