"""The memory budget reaches DuckDB: every connection to the working tables carries its
share as ``memory_limit`` and spills under the data directory."""

import duckdb

from jarvis_resources import JarvisConfigResource, TablesResource
from jarvis_resources.tables import SPILL_DIR, tables_held_open
from tests.pipeline_helpers import write_config


def test_working_connections_take_their_limit_from_the_budget(tmp_path):
    (tmp_path / "v").mkdir()
    config = write_config(tmp_path, {"v": tmp_path / "v"}, resources={"max_memory_mb": 512})
    tables = TablesResource(jarvis=JarvisConfigResource(config_file=str(config.config_path)))
    with tables_held_open(config), tables.get_connection() as conn:
        limit, spill = conn.execute("SELECT current_setting('memory_limit'), "
                                    "current_setting('temp_directory')").fetchone()
    assert limit == "128.0 MiB"  # a quarter of 512 MB
    assert spill == str(config.data_dir / SPILL_DIR)
    # a connection with other settings is refused while the tables are open: why every
    # connection of a process takes them from the one configuration
    with tables_held_open(config):
        try:
            duckdb.connect(str(config.duckdb_path)).close()
        except duckdb.Error as exc:
            assert "different configuration" in str(exc)
        else:
            raise AssertionError("DuckDB opened the working tables with other settings")
