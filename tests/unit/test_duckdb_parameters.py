"""Binding query parameters costs no import search (jarvis_core/stores/connections.py)."""

import importlib.util
import subprocess
import sys

import pytest

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


@pytest.mark.skipif(importlib.util.find_spec("pandas") is not None,
                    reason="pandas is installed here: DuckDB finds it once and keeps it")
def test_a_process_that_opened_a_snapshot_binds_parameters_without_import_searches():
    def searches(prepare: str) -> int:
        return int(subprocess.run([sys.executable, "-c", COUNT_SEARCHES.format(prepare=prepare)],
                                  capture_output=True, text=True, check=True).stdout)

    assert searches("") >= 10  # DuckDB searches for pandas again for every parameter
    assert searches("from jarvis_core.stores.connections import remember_missing_pandas\n"
                    "remember_missing_pandas()") == 0
