"""Jobs: the layers of one source after its ingestion (each kind's ingest job is made with its
raw asset, jarvis_assets/sources.py), their two halves for a progressive first refresh,
publishing, and the analytics snapshot."""

import dagster as dg

# Unpartitioned: it resolves references across all sources, so it runs with publishing.
CROSS_SOURCE_LINKS = "cross_source_links"
EMBEDDINGS = "embeddings"

# Every layer after ingestion works per source of any kind (the raw assets, each partitioned
# by its own kind's sources, run in their kind's ingest job).
PER_SOURCE_GROUPS = ("text", "vectors", "graph", "analytics")
_PER_SOURCE = (dg.AssetSelection.groups(*PER_SOURCE_GROUPS)
               - dg.AssetSelection.assets(CROSS_SOURCE_LINKS))

refresh_sources_job = dg.define_asset_job(
    name="refresh_sources",
    selection=_PER_SOURCE,
    description="Chunk, index, embed and link one ingested source; unchanged items are "
                "skipped.",
)

index_sources_job = dg.define_asset_job(
    name="index_sources",
    selection=_PER_SOURCE - dg.AssetSelection.assets(EMBEDDINGS),
    description="Everything of one source but its embeddings: text, keyword index, graph and "
                "analytics, so a large first refresh can be published (and searched by "
                "keyword) while the embeddings are made.",
)

embed_sources_job = dg.define_asset_job(
    name="embed_sources",
    selection=dg.AssetSelection.assets(EMBEDDINGS),
    description="The embeddings of one source: only chunks without a vector are embedded.",
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
