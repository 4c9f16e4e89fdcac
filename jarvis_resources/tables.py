"""The DuckDB tables every layer reads and writes (dagster-duckdb's connection handling)."""

import json
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
from jarvis_core.stores.connections import damaged, is_damage, remember_missing_pandas
from jarvis_core.stores.locks import (
    held_seconds,
    label_holder,
    lock_path,
    publishing,
    source_run,
    write_turn,
)
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


PARTITION_TAG = "dagster/partition"  # the tag Dagster gives a run of one partition
HELD_PREFIX = "seconds in write turns: "  # a run's last log line: what it held, how long
_RUNS_HELD: set[str] = set()  # runs this process holds the place of (resources nest copies)


class TablesResource(ConfigurableResource):
    """The working tables in the data directory. The schema is created once per run
    process (a new file gets the analytics history back from its backup); connections are
    short (one per read or write) and each holds the tables' write turn
    (``jarvis_core.stores.locks``), so runs take turns for them and wait on that lock. A
    damaged file fails the step with ``TablesDamaged``, naming the file and what to do.

    Every step uses the tables, so this resource also holds a run's place among runs for
    the run's whole length: a run of one source (one partition) holds that source's lock,
    beside runs of other sources; any other run (publishing, the cross-source links) waits
    until no source is mid-refresh and holds them off until it ends."""

    jarvis: JarvisConfigResource

    _duckdb: DuckDBResource | None = PrivateAttr(default=None)
    _run_hold: ExitStack | None = PrivateAttr(default=None)
    _held_before: dict[str, float] = PrivateAttr(default_factory=dict)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        run = context.run
        try:
            if run is not None and run.run_id not in _RUNS_HELD:  # once, nested copies aside
                _RUNS_HELD.add(run.run_id)
                self._run_hold = ExitStack()
                self._run_hold.callback(_RUNS_HELD.discard, run.run_id)
                label_holder(f"run {run.run_id[:8]} of {run.job_name}")
                self._held_before = held_seconds()
                source, data_dir = run.tags.get(PARTITION_TAG), self.jarvis.load().data_dir
                self._run_hold.enter_context(source_run(data_dir, source) if source
                                             else publishing(data_dir))
            self._open()
        except BaseException:
            self.teardown_after_execution(context)
            raise

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._run_hold is not None:
            self._run_hold.close()
            self._run_hold = None
            held = {store: round(seconds - self._held_before.get(store, 0.0), 3)
                    for store, seconds in held_seconds().items()}
            context.log.info(f"{HELD_PREFIX}{json.dumps(held)}")

    def _open(self) -> DuckDBResource:
        if self._duckdb is None:
            remember_missing_pandas()  # over 900 import searches a refresh of the sample
            config = self.jarvis.load()
            config.data_dir.mkdir(parents=True, exist_ok=True)
            resource = DuckDBResource(database=str(config.duckdb_path),
                                      connection_config=connection_config(config))
            with self._turn():
                self._probe(config)
            with self._turn(), self._translated(), resource.get_connection() as conn:
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

    def _turn(self):
        return write_turn(lock_path(self.jarvis.load().duckdb_path), "the working tables")

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._turn(), self._translated(), self._open().get_connection() as conn:
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
