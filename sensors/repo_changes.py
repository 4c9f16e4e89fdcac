"""Requests a refresh of a repository when its branch head moved (a force-push included),
and only then: `git ls-remote` for a ``url:`` repository, so nothing is cloned to find out."""

from __future__ import annotations

import dagster as dg
import duckdb

from jarvis_assets import jobs
from jarvis_core.sources.changes import published_head, repository_head
from jarvis_core.sources.repo.git import GitError
from jarvis_resources import JarvisConfigResource
from sensors.common import first_run_requested, read_cursor, registered_sources, write_cursor


@dg.sensor(
    job=jobs.refresh_sources_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Refreshes a repository's partition when the head of its configured branch "
                "moved, a force-push included (remote repositories are asked with git "
                "ls-remote, never cloned to find out). The run's tags name the new and the "
                "previous head.",
)
def repo_changes_sensor(context: dg.SensorEvaluationContext,
                        jarvis: JarvisConfigResource) -> dg.SensorResult:
    """Refreshes a registered repository's partition when its head moved. The cursor holds
    the last head seen per repository; with none, the head last published is compared."""
    config = jarvis.load()
    seen: dict[str, str] = read_cursor(context)
    heads: dict[str, str] = {}
    run_requests = []
    for source in registered_sources(context.instance, list(config.repos)):
        try:
            head = repository_head(config, source)
            previous = seen.get(source) or published_head(config.data_dir, source)
        except (GitError, duckdb.Error) as exc:
            context.log.error(f"repository {source!r} not checked for changes: {exc}")
            if source in seen:
                heads[source] = seen[source]
            continue
        heads[source] = head
        first_look_covered = (source not in seen and previous is None
                              and first_run_requested(context.instance, source))
        if head != previous and not first_look_covered:
            run_requests.append(dg.RunRequest(
                partition_key=source, run_key=f"{source}-{head}",
                tags={"jarvis/reason": "repository head moved", "jarvis/head": head,
                      "jarvis/previous_head": previous or "(none)"}))
    return dg.SensorResult(run_requests=run_requests, cursor=write_cursor(heads))
