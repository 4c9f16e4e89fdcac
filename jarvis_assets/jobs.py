"""The main job: every per-source layer for one source partition."""

import dagster as dg

PER_SOURCE_GROUPS = ("sources", "text", "vectors", "graph", "analytics")

refresh_sources_job = dg.define_asset_job(
    name="refresh_sources",
    selection=dg.AssetSelection.groups(*PER_SOURCE_GROUPS),
    description="Ingest, chunk, embed and link one source; unchanged items are skipped.",
)

analytics_snapshot_job = dg.define_asset_job(
    name="analytics_snapshot",
    selection=dg.AssetSelection.groups("analytics"),
    description="Take a time-stamped analytics snapshot of one source (history for trends).",
)

publish_serving_job = dg.define_asset_job(
    name="publish_serving",
    selection=dg.AssetSelection.groups("serving"),
    description="Publish the stores as a new serving version for the query side.",
)
