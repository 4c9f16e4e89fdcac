"""The main job: every per-source layer for one source partition."""

import dagster as dg

PER_SOURCE_GROUPS = ("sources", "text")

refresh_sources_job = dg.define_asset_job(
    name="refresh_sources",
    selection=dg.AssetSelection.groups(*PER_SOURCE_GROUPS),
    description="Ingest, chunk (and later embed and link) one source; unchanged items are skipped.",
)
