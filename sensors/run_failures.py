"""Failure notices: every failed Jarvis run becomes a notice a person will see."""

import dagster as dg

from jarvis_core.notifications import Notice, notify
from jarvis_resources import JarvisConfigResource

MAX_MESSAGE_CHARS = 2_000


def failure_notice(run: dg.DagsterRun, step_failures: list[dg.DagsterEvent],
                   fallback_message: str) -> Notice:
    """A notice naming the run, its partition and each failed step with the error that
    caused it (the user's exception, not Dagster's wrapper around it)."""
    partition = run.tags.get("dagster/partition")
    causes = []
    for event in step_failures:
        error = event.step_failure_data.error
        root = error.cause if error is not None and error.cause is not None else error
        if root is not None:
            causes.append(f"{event.step_key}: {root.message.strip()}")
    return Notice(kind="run_failure",
                  title=f"Jarvis run failed: {run.job_name}"
                        + (f" [{partition}]" if partition else ""),
                  message=("\n".join(causes) or fallback_message)[:MAX_MESSAGE_CHARS],
                  job=run.job_name, run_id=run.run_id, partition=partition,
                  failed_steps=sorted({event.step_key for event in step_failures
                                       if event.step_key}))


@dg.run_failure_sensor(
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Turns every failed run into a notice naming the run, its source partition "
                "and each failed step with its error: logged, stored for `jarvis "
                "notifications`, and POSTed to JARVIS_WEBHOOK_URL when that is set.",
)
def run_failure_notices(context: dg.RunFailureSensorContext,
                        jarvis: JarvisConfigResource) -> None:
    """Records a notice (log line, notifications table, optional webhook) for a failed run."""
    config = jarvis.load()
    notify(config.notifications_path,
           failure_notice(context.dagster_run, context.get_step_failure_events(),
                          context.failure_event.message or "run failed"),
           webhook_url=config.environment.webhook_url, logger=context.log)
