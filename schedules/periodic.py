"""Periodic runs behind the change sensors: a nightly ingestion of every source (a safety net
for changes a sensor cannot see; the later layers follow by automation) and a daily
analytics snapshot (history for trends).

A run ingests the sources of one kind (their raw asset is partitioned by kind), so the
nightly refresh is one schedule per kind with sources configured. Cron expressions and
timezones come from the configuration, so the schedules are built by a function from it
rather than defined at module level."""

import dagster as dg

from jarvis_assets import jobs
from jarvis_assets.partitions import kind_partitions, source_partitions
from jarvis_core.config import JarvisConfig
from jarvis_core.settings import ConfigError, ScheduleSettings
from jarvis_core.sources import registry
from schedules.memory_decay import memory_decay_schedule


def per_source_schedule(name: str, job, partitions: str, settings: ScheduleSettings,
                        description: str) -> dg.ScheduleDefinition:
    """One run of ``job`` per registered partition of ``partitions`` at each tick; the run
    key makes a tick idempotent."""

    @dg.schedule(name=name, job=job, cron_schedule=settings.cron,
                 execution_timezone=settings.timezone, description=description,
                 default_status=dg.DefaultScheduleStatus.RUNNING)
    def per_source_runs(context: dg.ScheduleEvaluationContext):
        tick = context.scheduled_execution_time
        for source in context.instance.get_dynamic_partitions(partitions):
            yield dg.RunRequest(partition_key=source, run_key=f"{name}-{source}-{tick:%Y%m%d%H%M}",
                                tags={"jarvis/reason": f"schedule {name}"})

    return per_source_runs


def _schedule(config: JarvisConfig, field: str, *args) -> dg.ScheduleDefinition:
    """A per-source schedule at ``schedules.<field>``; a cron expression Dagster rejects is a
    configuration error naming it."""
    settings = getattr(config.schedules, field)
    try:
        return per_source_schedule(args[0], args[1], args[2], settings, args[3])
    except dg.DagsterInvalidDefinitionError as exc:
        raise ConfigError(f"{config.config_path or 'configuration'}: schedules.{field}.cron: "
                          f"{settings.cron!r} is not a valid cron expression") from exc


def build_schedules(config: JarvisConfig, ingest_jobs: dict) -> list[dg.ScheduleDefinition]:
    """The nightly ingestion of each kind with configured sources (``ingest_jobs``: each
    kind's ingest job by kind name), the daily analytics snapshot and the memory decay."""
    nightly = [
        _schedule(config, "refresh", f"nightly_refresh_{kind.name}", ingest_jobs[kind.name],
                  kind_partitions(kind).name,
                  f"Ingests every registered {kind.label} (its later layers follow), a safety "
                  "net behind the change sensors; unchanged items cost a stat each.")
        for kind in registry.kinds() if config.sources_of(kind.name)]
    analytics = _schedule(config, "analytics", "daily_analytics", jobs.analytics_snapshot_job,
                          source_partitions.name, "Takes an analytics snapshot of every "
                          "registered source, for the history of trends.")
    return [*nightly, analytics, memory_decay_schedule(config)]
