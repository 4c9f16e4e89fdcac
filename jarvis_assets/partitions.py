"""Partitions: one per configured source, so a run or backfill can target one.

Each kind's raw asset is partitioned by the sources of its kind only (``vault_sources``,
``tickets_sources``...), so the UI never shows a raw asset materialized for a source of
another kind; every layer after ingestion works per source of any kind (``sources``) and
maps its partition to the raw asset of the source's kind by name.
"""

import dagster as dg

from jarvis_core.sources.kind import SourceKind

source_partitions = dg.DynamicPartitionsDefinition(name="sources")


def kind_partitions(kind: SourceKind) -> dg.DynamicPartitionsDefinition:
    """The partitions of one kind's sources (equal by name wherever it is made)."""
    return dg.DynamicPartitionsDefinition(name=kind.partitions)


def partition_requests(kind: SourceKind, added: list[str]) -> list:
    """Requests that register new sources of ``kind`` in both partition sets."""
    return [source_partitions.build_add_request(added),
            kind_partitions(kind).build_add_request(added)] if added else []
