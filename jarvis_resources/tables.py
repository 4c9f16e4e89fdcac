"""The DuckDB tables every layer reads and writes (dagster-duckdb's connection handling)."""

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import duckdb
from dagster import ConfigurableResource, InitResourceContext, get_dagster_logger
from dagster_duckdb import DuckDBResource
from pydantic import PrivateAttr

from jarvis_core.analytics.backup import backup_dir, restore_history
from jarvis_core.config import JarvisConfig
from jarvis_core.sources import registry
from jarvis_core.stores import tables
from jarvis_core.stores.connections import damaged, is_damage
from jarvis_resources.config import JarvisConfigResource

SPILL_DIR = "duckdb-spill"


def connection_config(config: JarvisConfig) -> dict[str, str]:
    """The settings of every connection to the working tables. DuckDB shares one open
    database among a process's connections and refuses one with other settings, so all of
    them come from here: the memory budget's share for DuckDB (``resources.max_memory_mb``),
    beyond which it spills to a folder of the data directory instead of growing."""
    return {"custom_user_agent": "jarvis",
            "memory_limit": f"{config.resources.duckdb_memory_mb}MiB",
            "temp_directory": str(config.data_dir / SPILL_DIR)}


class TablesResource(ConfigurableResource):
    """The working tables in the data directory. The schema is created once per run
    process (a new file gets the analytics history back from its backup); connections are
    short (one per read or write), so runs take turns. A damaged file fails the step with
    ``TablesDamaged``, naming the file and what to do."""

    jarvis: JarvisConfigResource

    _duckdb: DuckDBResource | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._open()

    def _open(self) -> DuckDBResource:
        if self._duckdb is None:
            config = self.jarvis.load()
            config.data_dir.mkdir(parents=True, exist_ok=True)
            self._probe(config)
            resource = DuckDBResource(database=str(config.duckdb_path),
                                      connection_config=connection_config(config))
            with self._translated(), resource.get_connection() as conn:
                tables.ensure_schema(conn, registry.declared_tables())
                restored = restore_history(conn, backup_dir(config.data_dir))
            if restored:
                get_dagster_logger().warning(f"analytics history: {restored} snapshots restored "
                                             f"from {backup_dir(config.data_dir)}")
            self._duckdb = resource
        return self._duckdb

    def _probe(self, config: JarvisConfig) -> None:
        """Fail at once on a damaged file: dagster-duckdb retries every IO error for a minute
        and more, as it would a lock another run holds."""
        with self._translated():
            try:
                duckdb.connect(str(config.duckdb_path), config=connection_config(config)).close()
            except duckdb.Error as exc:
                if is_damage(exc):
                    raise
                # locked by another run, say: the resource's retries wait for it

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """A DuckDB error that says the file is damaged becomes ``TablesDamaged``."""
        try:
            yield
        except duckdb.Error as exc:
            if is_damage(exc):
                raise damaged(self.jarvis.load().duckdb_path, exc) from exc
            raise

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._translated(), self._open().get_connection() as conn:
            # a session setting: DuckDB draws a bar on stdout under any query that runs over
            # 2 s (a spilling one, or one on a busy machine), which broke `refresh --json`
            conn.execute("SET enable_progress_bar = false")
            yield conn


@contextmanager
def tables_held_open(config: JarvisConfig) -> Iterator[None]:
    """Keep the working tables open for a whole `jarvis refresh`. DuckDB shares one open
    database among a process's connections, so every step's connection then costs a quarter
    of a millisecond instead of loading the catalog and checkpointing on close (15-35 ms
    each, over 200 per refresh of the sample). Another process's runs wait meanwhile, as
    dagster-duckdb retries a locked file. A file that cannot be opened (locked, damaged) is
    left to the runs, which report it as they do without this."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        try:
            stack.enter_context(duckdb.connect(str(config.duckdb_path),
                                               config=connection_config(config)))
        except duckdb.Error:
            pass
        yield
