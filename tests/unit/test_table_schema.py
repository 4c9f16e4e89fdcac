"""The working tables' schema: an older file gains what a newer release declares."""

import duckdb

from jarvis_core.stores import tables


def columns(conn, table: str) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
        [table]).fetchall()]


def test_missing_tables_and_columns_are_added_and_rows_kept():
    with duckdb.connect() as conn:
        tables.ensure_schema(conn)
        declared = {name: columns(conn, name) for name in tables.TABLES}
        assert declared == {name: list(schema) for name, (schema, _) in tables.TABLES.items()}
        last = declared["notes"][-1]
        conn.execute(f'ALTER TABLE notes DROP COLUMN "{last}"')  # as an older release made it
        conn.execute("DROP TABLE chunks")
        conn.execute("INSERT INTO notes (source, path) VALUES ('v', 'a.md')")
        tables.ensure_schema(conn)
        tables.ensure_schema(conn)  # a second call finds nothing to do
        assert {name: columns(conn, name) for name in tables.TABLES} == declared
        assert conn.execute("SELECT source, path FROM notes").fetchall() == [("v", "a.md")]
