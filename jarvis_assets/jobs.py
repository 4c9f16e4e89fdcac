"""The main job: every per-source layer for one source partition."""

import dagster as dg

# Unpartitioned: it resolves references across all sources, so it runs with publishing.
CROSS_SOURCE_LINKS = "cross_source_links"

PER_SOURCE_GROUPS = ("sources", "text", "vectors", "graph", "analytics")

refresh_sources_job = dg.define_asset_job(
    name="refresh_sources",
    selection=dg.AssetSelection.groups(*PER_SOURCE_GROUPS)
    - dg.AssetSelection.assets(CROSS_SOURCE_LINKS),
    description="Ingest, chunk, embed and link one source; unchanged items are skipped.",
)

analytics_snapshot_job = dg.define_asset_job(
    name="analytics_snapshot",
    selection=dg.AssetSelection.groups("analytics"),
    description="Take a time-stamped analytics snapshot of one source (history for trends).",
)

publish_serving_job = dg.define_asset_job(
    name="publish_serving",
    selection=dg.AssetSelection.groups("serving") | dg.AssetSelection.assets(CROSS_SOURCE_LINKS),
    description="Publish the stores as a new serving version for the query side.",
)
