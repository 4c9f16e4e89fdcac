"""One dynamic partition per configured source, so a run or backfill can target one.

Every kind of source shares the partitions; every per-source asset runs for every
partition, and a raw asset meets a partition of another kind with a fast no-op.
"""

import dagster as dg

from jarvis_core.config import JarvisConfig
from jarvis_core.sources.plan import record_unreachable
from jarvis_resources import TablesResource

source_partitions = dg.DynamicPartitionsDefinition(name="sources")


def other_kind_result(config: JarvisConfig, source: str, kind: str) -> dg.MaterializeResult | None:
    """The no-op result of a raw asset of ``kind`` for a source configured as another kind;
    None when the asset must run (the source is of ``kind``, or no longer configured and
    its rows must go)."""
    actual = config.source_kind(source)
    if actual is None or actual == kind:
        return None
    return dg.MaterializeResult(metadata={"source_kind": actual, "dagster/row_count": 0})


def unreachable_source_result(context: dg.AssetExecutionContext, tables: TablesResource,
                              source: str, kind: str, reason: str) -> dg.MaterializeResult:
    """A source that cannot be read at all: say so, keep what earlier runs stored, record it
    for the ``source_reachable`` check, and let the other sources go on."""
    context.log.error(f"{source}: not ingested: {reason}")
    with tables.get_connection() as conn:
        kept = record_unreachable(conn, source, kind, reason)
    return dg.MaterializeResult(metadata={
        "source_kind": kind, "error": reason, "failed": 1, "dagster/row_count": kept})
