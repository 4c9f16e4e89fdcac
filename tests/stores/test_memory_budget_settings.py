"""The memory budget reaches DuckDB: every connection to the working tables carries its
share as ``memory_limit`` and spills under the data directory."""

import subprocess
import sys
import textwrap

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



def test_working_connections_draw_no_progress_bar(tmp_path):
    """In a plain process (pytest's turns it off) DuckDB draws a bar on stdout under any query
    over 2 s, which corrupted `jarvis refresh --json`: read in a child process."""
    (tmp_path / "v").mkdir()
    config = write_config(tmp_path, {"v": tmp_path / "v"})
    child = textwrap.dedent(f"""
        from jarvis_resources import JarvisConfigResource, TablesResource
        tables = TablesResource(jarvis=JarvisConfigResource(
            config_file={str(config.config_path)!r}))
        with tables.get_connection() as conn:
            print(conn.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0])
        """)
    shown = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                           check=True).stdout
    assert shown.strip() == "False"
