"""Dagster resources of Jarvis: configuration, DuckDB tables, embedder, vector and graph
stores."""

import os
from contextlib import contextmanager
from pathlib import Path

from dagster import ConfigurableResource, EnvVar, InitResourceContext
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr

from jarvis_core.config import (
    CONFIG_ENV,
    NEO4J_PASSWORD_ENV,
    NEO4J_URI_ENV,
    NEO4J_USER_ENV,
    QDRANT_API_KEY_ENV,
    QDRANT_URL_ENV,
    JarvisConfig,
    load_config,
)


class JarvisConfigResource(ConfigurableResource):
    """The sources and settings, read from the configuration file once per process."""

    config_file: str | None = None

    _config: JarvisConfig | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._config = load_config(self.config_file)

    def load(self) -> JarvisConfig:
        if self._config is None:
            self._config = load_config(self.config_file)
        return self._config


class EmbedderResource(ConfigurableResource):
    """A sentence-transformers model, loaded once per run process when a step needs it."""

    model: str
    device: str = "cpu"
    batch_size: int = 32
    backend: str = "auto"
    cache_dir: str

    _embedder = PrivateAttr(default=None)

    def get(self):
        if self._embedder is None:
            from jarvis_core.text.embedder import Embedder

            self._embedder = Embedder(self.model, device=self.device, batch_size=self.batch_size,
                                      backend=self.backend, cache_dir=Path(self.cache_dir))
        return self._embedder


class VectorStoreResource(ConfigurableResource):
    """Qdrant: an embedded Edge shard under ``path`` by default, a server when ``url`` is set.

    A store is opened per use and closed right after, so the Edge shard's directory lock
    is held only while a step writes.
    """

    path: str
    url: str | None = None
    api_key: str | None = None

    @property
    def backend(self) -> str:
        return "server" if self.url else "edge"

    @contextmanager
    def open(self, model: str, dimension: int):
        from jarvis_core.stores.vectors.base import collection_name
        from jarvis_core.stores.vectors.edge import EdgeVectorStore
        from jarvis_core.stores.vectors.server import QdrantServerVectorStore

        collection = collection_name(model, dimension)
        store = (QdrantServerVectorStore(self.url, self.api_key, collection, dimension, model)
                 if self.url else EdgeVectorStore(Path(self.path), collection, dimension, model))
        try:
            yield store
        finally:
            store.close()


class GraphStoreResource(ConfigurableResource):
    """The graph the query side searches: an embedded SQLite store under ``path`` by
    default, Neo4j when ``neo4j_uri`` is set. DuckDB's graph tables stay the source of truth."""

    path: str
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: str | None = None

    @property
    def backend(self) -> str:
        return "neo4j" if self.neo4j_uri else "embedded"

    @contextmanager
    def open(self):
        from jarvis_core.stores.graph.neo4j import Neo4jGraphStore
        from jarvis_core.stores.graph.sqlite import SqliteGraphStore

        if self.neo4j_uri:
            store = Neo4jGraphStore(self.neo4j_uri, self.neo4j_user, self.neo4j_password or "")
        else:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            store = SqliteGraphStore(Path(self.path))
        try:
            yield store
        finally:
            store.close()


def _env_or(name: str, fallback: str | None):
    """An EnvVar (resolved at run time, hidden in the UI) when set, else the fallback."""
    return EnvVar(name) if os.environ.get(name) else fallback


def build_resources(config: JarvisConfig) -> dict:
    """Resources for one configuration: every embedded store lives under its data directory."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    embedding = config.embedding
    return {
        "jarvis": JarvisConfigResource(
            config_file=str(config.config_path) if config.config_path else EnvVar(CONFIG_ENV)),
        "duckdb": DuckDBResource(database=str(config.duckdb_path)),
        "embedder": EmbedderResource(model=embedding.model, device=embedding.device,
                                     batch_size=embedding.batch_size, backend=embedding.backend,
                                     cache_dir=str(config.cache_dir)),
        "graph": GraphStoreResource(path=str(config.graph_path),
                                    neo4j_uri=_env_or(NEO4J_URI_ENV, None),
                                    neo4j_user=_env_or(NEO4J_USER_ENV, "neo4j"),
                                    neo4j_password=_env_or(NEO4J_PASSWORD_ENV, None)),
        "vectors": VectorStoreResource(path=str(config.vectors_path),
                                       url=_env_or(QDRANT_URL_ENV, config.vectors.url),
                                       api_key=_env_or(QDRANT_API_KEY_ENV, None)),
    }
