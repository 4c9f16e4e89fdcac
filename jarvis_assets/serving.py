"""Serving layer: an immutable, versioned copy of what the query side reads."""

import time
from contextlib import ExitStack

import dagster as dg

from jarvis_assets.analytics import vault_analytics
from jarvis_assets.automation import follows_upstream
from jarvis_assets.cross_links import cross_source_links
from jarvis_assets.embeddings import embeddings
from jarvis_assets.graph import knowledge_graph
from jarvis_assets.keyword_index import keyword_index
from jarvis_core.pending import published_fingerprints, refreshed_sources
from jarvis_core.sources import registry
from jarvis_core.stores import serving
from jarvis_core.stores.publish import publish_version
from jarvis_core.text.query_model import prepare_query_model
from jarvis_resources import (
    GraphStoreResource,
    JarvisConfigResource,
    KeywordIndexResource,
    TablesResource,
    VectorStoreResource,
)


@dg.asset(
    deps=[embeddings, knowledge_graph, cross_source_links, vault_analytics, keyword_index],
    group_name="serving",
    kinds={"duckdb", "qdrant"},
    automation_condition=follows_upstream,
)
def serving_snapshot(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
                     tables: TablesResource, vectors: VectorStoreResource,
                     graph: GraphStoreResource,
                     keyword: KeywordIndexResource) -> dg.MaterializeResult:
    """Publishes the tables, vectors, graph and keyword index as a new version that query
    processes switch to atomically, so they never read a store that a refresh is writing."""
    started, config = time.perf_counter(), jarvis.load()
    query_model, why_none = prepare_query_model(config.embedding, config.cache_dir)
    if why_none:
        context.log.warning(f"no query model published: {why_none}")
    with ExitStack() as stores:
        vector_store = stores.enter_context(vectors.open())
        graph_store = (stores.enter_context(graph.open()) if graph.backend == "embedded"
                       else None)
        published = publish_version(tables.get_connection, config.data_dir,
                                    registry.published_tables(), vector_store,
                                    graph_store, stores.enter_context(keyword.open()),
                                    graph.backend, _fingerprints(context, config),
                                    vectors.embedder.choice.as_dict(), query_model)
    version = published.version
    context.log.info(f"published serving version {version.name}")
    return dg.MaterializeResult(metadata={
        "version": version.name, "path": dg.MetadataValue.path(str(version.path)),
        "chunks": published.chunks, "vectors": sum(published.vectors_by_source.values()),
        "vectors_by_source": dg.MetadataValue.json(published.vectors_by_source),
        "vectors_complete": version.manifest["vectors_complete"],
        "collection": vectors.collection,
        "embedding_backend": dg.MetadataValue.json(version.manifest["embedding"]),
        "query_model": version.manifest["encoder"] or f"none: {why_none}",
        "publish_seconds": round(time.perf_counter() - started, 3),
    })


def _fingerprints(context: dg.AssetExecutionContext, config) -> dict[str, str]:
    """The sources' settings fingerprints the version records (``published_fingerprints``):
    after `jarvis refresh --source`, the sources it did not run keep the earlier ones."""
    try:
        previous = serving.current_version(config.data_dir).manifest.get("settings")
    except serving.NotPublished:
        previous = None
    return published_fingerprints(config, refreshed_sources(context.run.tags), previous)
