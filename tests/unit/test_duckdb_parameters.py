"""Binding query parameters costs no import search (jarvis_core/stores/connections.py), on
the query side and in the pipeline."""

import importlib.util
import subprocess
import sys

import pytest

from tests.pipeline_helpers import write_config

COUNT_SEARCHES = """
import importlib._bootstrap as bootstrap
import duckdb
{prepare}
connection = duckdb.connect()
connection.execute("CREATE TABLE t (a VARCHAR)")
query = "SELECT * FROM t WHERE a IN ($x, $y)"
connection.execute(query, {{"x": "a", "y": "b"}})  # the modules DuckDB imports once
searched = []
search = bootstrap._find_spec
bootstrap._find_spec = lambda name, *rest: searched.append(name) or search(name, *rest)
for _ in range(5):
    connection.execute(query, {{"x": "a", "y": "b"}}).fetchall()
print(len(searched))
"""


WITHOUT_PANDAS = pytest.mark.skipif(
    importlib.util.find_spec("pandas") is not None,
    reason="pandas is installed here: DuckDB finds it once and keeps it")


def searches(prepare: str) -> int:
    return int(subprocess.run([sys.executable, "-c", COUNT_SEARCHES.format(prepare=prepare)],
                              capture_output=True, text=True, check=True).stdout)


@WITHOUT_PANDAS
def test_a_process_that_opened_a_snapshot_binds_parameters_without_import_searches():
    assert searches("") >= 10  # DuckDB searches for pandas again for every parameter
    assert searches("from jarvis_core.stores.connections import remember_missing_pandas\n"
                    "remember_missing_pandas()") == 0


@WITHOUT_PANDAS
def test_a_refresh_process_binds_parameters_without_import_searches(tmp_path):
    """Once the pipeline's tables resource has opened the working tables (every step's
    connection comes from it), and once core has read a DuckDB file."""
    (tmp_path / "vault").mkdir()
    config = write_config(tmp_path, {"vault": tmp_path / "vault"})
    assert searches("from jarvis_resources import JarvisConfigResource, TablesResource\n"
                    "with TablesResource(jarvis=JarvisConfigResource(\n"
                    f"        config_file={str(config.config_path)!r})).get_connection():\n"
                    "    pass") == 0
    assert searches("from pathlib import Path\n"
                    "from jarvis_core.stores.connections import read_only\n"
                    f"with read_only(Path({str(config.duckdb_path)!r})):\n"
                    "    pass") == 0
