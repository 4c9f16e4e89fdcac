"""What the Jarvis sensors share: their JSON cursors, the registered source partitions and
the runs already made for a partition."""

from __future__ import annotations

import json

import dagster as dg

from jarvis_assets.partitions import kind_partitions
from jarvis_core.sources.kind import SourceKind

# The reason tag of the run requested when a source is registered as a partition.
NEW_SOURCE = "new source"
IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
             dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
             dg.DagsterRunStatus.CANCELING]


def read_cursor(context: dg.SensorEvaluationContext) -> dict:
    """The cursor as a dict; a cursor that is not a JSON object (hand-edited, or from an
    older release) counts as none, so the sensor compares with the published version."""
    if not context.cursor:
        return {}
    try:
        cursor = json.loads(context.cursor)
    except ValueError:
        cursor = None
    if not isinstance(cursor, dict):
        context.log.warning(f"ignoring an unreadable cursor: {context.cursor[:200]!r}")
        return {}
    return cursor


def write_cursor(cursor: dict) -> str:
    return json.dumps(cursor, sort_keys=True)


def registered_sources(instance: dg.DagsterInstance, kind: SourceKind,
                       names: list[str]) -> list[str]:
    """``names`` that are registered partitions of ``kind``, sorted: the change sensors check
    only those; registering (and the first run) belongs to ``source_partitions_sensor``."""
    known = set(instance.get_dynamic_partitions(kind_partitions(kind).name))
    return [name for name in sorted(names) if name in known]


def has_runs(instance: dg.DagsterInstance, source: str, *, tags: dict[str, str] | None = None,
             statuses: list[dg.DagsterRunStatus] | None = None) -> bool:
    return bool(instance.get_runs(
        filters=dg.RunsFilter(tags={"dagster/partition": source, **(tags or {})},
                              statuses=statuses), limit=1))


def first_run_requested(instance: dg.DagsterInstance, source: str) -> bool:
    """Whether the run requested when the source was registered exists. A change sensor
    meeting a source it has not seen and that nothing published yet takes this run as
    covering what it sees, instead of requesting a second one."""
    return has_runs(instance, source, tags={"jarvis/reason": NEW_SOURCE})


def runs_in_flight(instance: dg.DagsterInstance, source: str) -> bool:
    """Whether a run for the partition is queued or running."""
    return has_runs(instance, source, statuses=IN_FLIGHT)
