"""The vector store: Qdrant Edge under the data directory, or a Qdrant server by URL."""

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from dagster import ConfigurableResource, get_dagster_logger

from jarvis_core.stores.healing import open_vector_store
from jarvis_core.stores.locks import lock_path, write_turn
from jarvis_core.stores.vectors.base import VectorStore, collection_name
from jarvis_resources.config import JarvisConfigResource
from jarvis_resources.embedder import EmbedderResource
from jarvis_resources.tables import TablesResource


class VectorStoreResource(ConfigurableResource):
    """The configured model's collection, for the precision it computes in here. A store is
    opened per use (per write batch when embedding) and closed right after, holding the
    collection's write turn (``jarvis_core.stores.locks``; a Qdrant server needs none), so
    runs of other sources write it in between; opening needs the model's name and
    dimension, never its weights. A damaged or emptied store is rebuilt from the chunks table
    when opened with ``heal`` (``jarvis_core.stores.healing``)."""

    jarvis: JarvisConfigResource
    embedder: EmbedderResource
    tables: TablesResource

    @property
    def backend(self) -> str:
        return "server" if self.jarvis.load().vectors.url else "edge"

    @property
    def collection(self) -> str:
        return collection_name(self.embedder.model, self.embedder.dimension,
                               self.embedder.choice.precision)

    def _store(self) -> VectorStore:
        config = self.jarvis.load()
        model, dimension = self.embedder.model, self.embedder.dimension
        if config.vectors.url:
            from jarvis_core.stores.vectors.server import QdrantServerVectorStore

            return QdrantServerVectorStore(config.vectors.url, config.environment.qdrant_api_key,
                                           self.collection, dimension, model)
        from jarvis_core.stores.vectors.edge import EdgeVectorStore

        return EdgeVectorStore(config.vectors_path, self.collection, dimension, model,
                               part_points=config.resources.vector_part_points)

    @contextmanager
    def open(self, heal: bool = True) -> Iterator[VectorStore]:
        """The store, in a write turn; ``heal=False`` skips the integrity check (a batch
        written right after a healed open)."""
        config = self.jarvis.load()
        directory = None if config.vectors.url else config.vectors_path / self.collection
        with ExitStack() as turn:
            if directory is not None:
                turn.enter_context(write_turn(lock_path(directory), f"vector store {directory}"))
            store = (open_vector_store(self._store, self.collection, directory,
                                       config.data_dir, self.tables.get_connection,
                                       self.embedder, get_dagster_logger())
                     if heal else self._store())
            try:
                yield store
            finally:
                store.close()
