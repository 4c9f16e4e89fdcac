"""One dynamic partition per configured source, so a run or backfill can target one.

Vaults, repositories and ticket sets share the partitions; every per-source asset runs for
every partition, and a raw asset meets a partition of another kind with a fast no-op.
"""

import dagster as dg

from jarvis_core.config import JarvisConfig

source_partitions = dg.DynamicPartitionsDefinition(name="sources")


def other_kind_result(config: JarvisConfig, source: str, kind: str) -> dg.MaterializeResult | None:
    """The no-op result of a raw asset of ``kind`` for a source configured as another kind;
    None when the asset must run (the source is of ``kind``, or no longer configured and
    its rows must go)."""
    actual = config.source_kind(source)
    if actual is None or actual == kind:
        return None
    return dg.MaterializeResult(metadata={"source_kind": actual, "dagster/row_count": 0})
