"""One dynamic partition per configured source, so a run or backfill can target one."""

from dagster import DynamicPartitionsDefinition

source_partitions = DynamicPartitionsDefinition(name="sources")
