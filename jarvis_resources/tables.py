"""The DuckDB tables every layer reads and writes (dagster-duckdb's connection handling)."""

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
from dagster import ConfigurableResource, InitResourceContext
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr

from jarvis_core.stores import tables
from jarvis_resources.config import JarvisConfigResource


class TablesResource(ConfigurableResource):
    """The working tables in the data directory. The schema is created once per run
    process; connections are short (one per read or write), so runs take turns."""

    jarvis: JarvisConfigResource

    _duckdb: DuckDBResource | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._open()

    def _open(self) -> DuckDBResource:
        if self._duckdb is None:
            config = self.jarvis.load()
            config.data_dir.mkdir(parents=True, exist_ok=True)
            self._duckdb = DuckDBResource(database=str(config.duckdb_path))
            with self._duckdb.get_connection() as conn:
                tables.ensure_schema(conn)
        return self._duckdb

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._open().get_connection() as conn:
            yield conn
