"""The graph store the query side searches: embedded SQLite, or Neo4j by URI."""

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from dagster import ConfigurableResource, get_dagster_logger

from jarvis_core.stores.graph.base import GraphStore
from jarvis_core.stores.locks import lock_path, write_turn
from jarvis_resources.config import JarvisConfigResource
from jarvis_resources.tables import TablesResource


class GraphStoreResource(ConfigurableResource):
    """An embedded SQLite store under the data directory by default, Neo4j when $NEO4J_URI is
    set. DuckDB's graph tables stay the source of truth: a damaged or emptied SQLite store is
    rebuilt from them when opened (``jarvis_core.stores.healing``). The embedded store is
    open only in a write turn (``jarvis_core.stores.locks``): open it after extracting."""

    jarvis: JarvisConfigResource
    tables: TablesResource

    @property
    def backend(self) -> str:
        return "neo4j" if self.jarvis.load().environment.neo4j_uri else "embedded"

    @contextmanager
    def open(self) -> Iterator[GraphStore]:
        config = self.jarvis.load()
        environment = config.environment
        with ExitStack() as turn:
            if environment.neo4j_uri:
                from jarvis_core.stores.graph.neo4j import Neo4jGraphStore

                store = Neo4jGraphStore(environment.neo4j_uri, environment.neo4j_user,
                                        environment.neo4j_password)
            else:
                from jarvis_core.stores.healing import open_graph_store

                config.graph_path.parent.mkdir(parents=True, exist_ok=True)
                turn.enter_context(write_turn(lock_path(config.graph_path),
                                              f"graph store {config.graph_path}"))
                store = open_graph_store(config.graph_path, self.tables.get_connection,
                                         get_dagster_logger())
            try:
                yield store
            finally:
                store.close()
