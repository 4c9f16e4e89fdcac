"""The memory decay: once a day (``memory.decay_cron`` in ``memory.decay_timezone``) a run
archives the memories that are older than ``memory.decay_after_days`` and that no call ever
returned or read, and prunes the access log to its retention (jarvis_core/memory.py). Without
a memory vault in the configuration a tick skips, saying why."""

import dagster as dg

from jarvis_core.config import ConfigError, JarvisConfig
from jarvis_core.memory import decay_memories
from jarvis_resources.config import JarvisConfigResource


@dg.op(description="Archive old, never used memories; prune the access log.")
def decay_memory_notes(context: dg.OpExecutionContext, jarvis: JarvisConfigResource) -> dict:
    report = decay_memories(jarvis.load())
    context.log.info(f"memory vault {report['vault']}: archived {len(report['archived'])}, "
                     f"kept {report['kept']}")
    for problem in report["problems"]:
        context.log.warning(problem)
    context.add_output_metadata({"archived": len(report["archived"]), "kept": report["kept"],
                                 "problems": len(report["problems"])})
    return report


@dg.job(description="The memory decay (schedule memory_decay).")
def memory_decay_job() -> None:
    decay_memory_notes()


def memory_decay_schedule(config: JarvisConfig) -> dg.ScheduleDefinition:
    """The schedule; a cron expression Dagster rejects is a configuration error naming
    ``memory.decay_cron``."""
    settings = config.memory

    def decay_tick(context: dg.ScheduleEvaluationContext):
        if settings.vault is None:
            return dg.SkipReason("no memory vault configured (memory.vault)")
        tick = context.scheduled_execution_time
        return dg.RunRequest(run_key=f"memory_decay-{tick:%Y%m%d%H%M}",
                             tags={"jarvis/reason": "schedule memory_decay"})

    try:
        return dg.ScheduleDefinition(
            name="memory_decay", job=memory_decay_job, cron_schedule=settings.decay_cron,
            execution_timezone=settings.decay_timezone, execution_fn=decay_tick,
            description="Archives old memories nobody used; prunes the access log.",
            default_status=dg.DefaultScheduleStatus.RUNNING)
    except dg.DagsterInvalidDefinitionError as exc:
        raise ConfigError(f"{config.config_path or 'configuration'}: memory.decay_cron: "
                          f"{settings.decay_cron!r} is not a valid cron expression") from exc
