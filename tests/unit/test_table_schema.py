"""The working tables' schema: an older file gains what a newer release declares."""

import duckdb

from jarvis_core.sources import registry
from jarvis_core.stores import tables


def columns(conn, table: str) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
        [table]).fetchall()]


def test_missing_tables_and_columns_are_added_and_rows_kept():
    with duckdb.connect() as conn:
        tables.ensure_schema(conn, registry.declared_tables())
        names = [table.name for table in registry.declared_tables()]
        declared = {name: columns(conn, name) for name in names}
        assert declared == {table.name: list(table.schema) for table in registry.declared_tables()}
        last = declared["notes"][-1]
        conn.execute(f'ALTER TABLE notes DROP COLUMN "{last}"')  # as an older release made it
        conn.execute("DROP TABLE chunks")
        conn.execute("INSERT INTO notes (source, path) VALUES ('v', 'a.md')")
        tables.ensure_schema(conn, registry.declared_tables())
        tables.ensure_schema(conn, registry.declared_tables())  # a second call finds nothing to do
        assert {name: columns(conn, name) for name in names} == declared
        assert conn.execute("SELECT source, path FROM notes").fetchall() == [("v", "a.md")]
