"""The vector store: Qdrant Edge under the data directory, or a Qdrant server by URL."""

from collections.abc import Iterator
from contextlib import contextmanager

from dagster import ConfigurableResource

from jarvis_core.stores.vectors.base import VectorStore, collection_name
from jarvis_resources.config import JarvisConfigResource
from jarvis_resources.embedder import EmbedderResource


class VectorStoreResource(ConfigurableResource):
    """The configured model's collection. A store is opened per use and closed right after,
    so the Edge shard's directory lock is held only while a step writes; opening needs the
    model's name and dimension, never its weights."""

    jarvis: JarvisConfigResource
    embedder: EmbedderResource

    @property
    def backend(self) -> str:
        return "server" if self.jarvis.load().vectors.url else "edge"

    @property
    def collection(self) -> str:
        return collection_name(self.embedder.model, self.embedder.dimension)

    @contextmanager
    def open(self) -> Iterator[VectorStore]:
        config = self.jarvis.load()
        model, dimension = self.embedder.model, self.embedder.dimension
        if config.vectors.url:
            from jarvis_core.stores.vectors.server import QdrantServerVectorStore

            store = QdrantServerVectorStore(config.vectors.url,
                                            config.environment.qdrant_api_key,
                                            self.collection, dimension, model)
        else:
            from jarvis_core.stores.vectors.edge import EdgeVectorStore

            store = EdgeVectorStore(config.vectors_path, self.collection, dimension, model)
        try:
            yield store
        finally:
            store.close()
