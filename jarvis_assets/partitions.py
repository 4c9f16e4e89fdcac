"""One dynamic partition per configured source, so a run or backfill can target one.

Vaults, repositories and ticket sets share the partitions; every per-source asset runs for
every partition, and a raw asset meets a partition of another kind with a fast no-op.
"""

from datetime import UTC, datetime

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_core.config import JarvisConfig
from jarvis_core.stores import tables

# The ingest_failures path of a failure of the whole source rather than one of its items.
WHOLE_SOURCE = "."

source_partitions = dg.DynamicPartitionsDefinition(name="sources")


def other_kind_result(config: JarvisConfig, source: str, kind: str) -> dg.MaterializeResult | None:
    """The no-op result of a raw asset of ``kind`` for a source configured as another kind;
    None when the asset must run (the source is of ``kind``, or no longer configured and
    its rows must go)."""
    actual = config.source_kind(source)
    if actual is None or actual == kind:
        return None
    return dg.MaterializeResult(metadata={"source_kind": actual, "dagster/row_count": 0})


def unreachable_source_result(context: dg.AssetExecutionContext, duckdb: DuckDBResource,
                              source: str, kind: str, reason: str,
                              count_sql: str) -> dg.MaterializeResult:
    """A source that cannot be read at all (a missing folder, clone or export): say so, keep
    what earlier runs stored (an empty read would look like everything deleted), record it
    for the ``source_reachable`` check, and let the other sources go on."""
    context.log.error(f"{source}: not ingested: {reason}")
    with duckdb.get_connection() as conn:
        tables.ensure_schema(conn)
        tables.replace_rows(conn, "ingest_failures", source=source, remove_paths=None,
                           rows=tables.frame("ingest_failures", [{
                               "source": source, "path": WHOLE_SOURCE, "reason": reason,
                               "detected_at": datetime.now(UTC).replace(tzinfo=None)}]))
        kept = conn.execute(count_sql, [source]).fetchone()[0]
    return dg.MaterializeResult(metadata={
        "source_kind": kind, "error": reason, "failed": 1, "dagster/row_count": kept})
