"""DuckDB's cache handed back before the publish's vector index build, its limit kept."""

import duckdb

from jarvis_core.stores.connections import release_cache


def _cached_mb(conn: duckdb.DuckDBPyConnection) -> int:
    return conn.execute("SELECT sum(memory_usage_bytes) // 1048576 FROM duckdb_memory()"
                        ).fetchone()[0]


def test_the_cache_of_a_read_is_given_back_and_the_limit_kept(tmp_path):
    path = tmp_path / "t.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t AS SELECT md5(range::VARCHAR) || md5((range * 7)::VARCHAR) "
                     "|| md5((range * 13)::VARCHAR) AS s FROM range(1000000)")
    # whole MiB, as the working tables' limit is set (jarvis_resources.tables): it comes back
    # exactly
    with duckdb.connect(str(path), config={"memory_limit": "256MiB"}) as conn:
        conn.execute("SELECT max(s) FROM t").fetchone()
        limit = conn.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        assert _cached_mb(conn) >= 40
        release_cache(conn)
        assert _cached_mb(conn) <= 16
        assert conn.execute("SELECT current_setting('memory_limit')").fetchone()[0] == limit


def test_memory_still_in_use_stays_and_nothing_fails():
    """An in-memory table cannot be evicted: the lower limit is refused, the limit kept."""
    with duckdb.connect(":memory:", config={"memory_limit": "256MiB"}) as conn:
        conn.execute("CREATE TABLE t AS SELECT range AS i, repeat('x', 100) AS s "
                     "FROM range(300000)")
        limit = conn.execute("SELECT current_setting('memory_limit')").fetchone()[0]
        release_cache(conn)
        assert conn.execute("SELECT current_setting('memory_limit')").fetchone()[0] == limit
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 300000
