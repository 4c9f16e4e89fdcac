"""The main job: every per-source layer for one source partition."""

import dagster as dg

from jarvis_assets.partitions import source_partitions

PER_SOURCE_GROUPS = ("sources", "text")

refresh_sources_job = dg.define_asset_job(
    name="refresh_sources",
    selection=dg.AssetSelection.groups(*PER_SOURCE_GROUPS),
    partitions_def=source_partitions,
    description="Ingest, chunk (and later embed and link) one source; unchanged items are skipped.",
)
