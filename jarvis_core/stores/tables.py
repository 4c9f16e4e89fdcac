"""The DuckDB tables of Jarvis, declared once as polars schemas: here the tables every source
kind shares (chunks, documents, graph, failures, analytics); each kind declares its raw
tables in its folder (jarvis_core/sources/<kind>/tables.py).

The pipeline writes them (through dagster-duckdb) and the query side reads them; both take
the table layout from the declarations, so the DDL is generated from the polars schemas the
writers build their frames with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass

import duckdb
import polars as pl

from jarvis_core.stores.transaction import transaction

# A way to open a short connection to the tables (each holds the tables' write turn).
Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]


@dataclass(frozen=True)
class Table:
    """A table: its name, its columns as a polars schema and its primary key (none when
    uniqueness is an asset check rather than a constraint)."""

    name: str
    schema: pl.Schema
    key: tuple[str, ...] = ()

    def frame(self, rows: Iterable[dict]) -> pl.DataFrame:
        """Rows as a frame with the table's exact schema (so empty lists keep their types)."""
        return pl.DataFrame(list(rows), schema=self.schema, orient="row")

    def create_sql(self) -> str:
        columns = [f'"{col}" {duckdb_type(dtype)}' for col, dtype in self.schema.items()]
        if self.key:
            columns.append(f"PRIMARY KEY ({', '.join(self.key)})")
        return f"CREATE TABLE IF NOT EXISTS {self.name} ({', '.join(columns)})"


INGEST_FAILURES = Table("ingest_failures", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "reason": pl.Utf8,
    "size_bytes": pl.Int64, "mtime_ns": pl.Int64, "detected_at": pl.Datetime("us"),
}), ("source", "path"))

CHUNKS = Table("chunks", pl.Schema({
    "chunk_id": pl.Utf8, "source": pl.Utf8, "source_type": pl.Utf8, "doc_key": pl.Utf8,
    "path": pl.Utf8, "title": pl.Utf8, "position": pl.Int32,
    "heading_path": pl.List(pl.Utf8), "context": pl.Utf8, "text": pl.Utf8,
    "token_count": pl.Int32,
    "char_start": pl.Int32, "char_end": pl.Int32, "doc_hash": pl.Utf8,
}))

CHUNKED_DOCUMENTS = Table("chunked_documents", pl.Schema({
    "source": pl.Utf8, "doc_key": pl.Utf8, "path": pl.Utf8, "doc_hash": pl.Utf8,
    "chunk_config": pl.Utf8, "chunk_count": pl.Int32,
    "tokens_checked": pl.Boolean,  # a check recounted its chunks' tokens since it was chunked
}), ("source", "doc_key"))

# Every document of every source as its kind describes it (jarvis_core/sources/kind.py),
# without its text: what the vectors' and keyword index's payloads, GraphRAG's recency and
# lookup read, whatever the kind.
DOCUMENTS = Table("documents", pl.Schema({
    "source": pl.Utf8, "source_type": pl.Utf8, "doc_key": pl.Utf8, "path": pl.Utf8,
    "title": pl.Utf8, "doc_hash": pl.Utf8, "modified_at": pl.Datetime("us"),
    "tags": pl.List(pl.Utf8), "names": pl.List(pl.Utf8),
}), ("source", "doc_key"))

GRAPH_NODES = Table("graph_nodes", pl.Schema({
    "source": pl.Utf8, "node_key": pl.Utf8, "type": pl.Utf8, "title": pl.Utf8,
    "node_source": pl.Utf8, "properties": pl.Utf8,
    "first_seen": pl.Datetime("us"), "last_seen": pl.Datetime("us"),
}), ("source", "node_key"))

GRAPH_EDGES = Table("graph_edges", pl.Schema({
    "edge_key": pl.Utf8, "source": pl.Utf8, "origin": pl.Utf8, "src": pl.Utf8, "dst": pl.Utf8,
    "relation": pl.Utf8, "confidence": pl.Utf8, "extractor": pl.Utf8,
    "evidence": pl.List(pl.Utf8), "evidence_text": pl.Utf8, "weight": pl.Float64,
}))

BROKEN_LINKS = Table("graph_broken_links", pl.Schema({
    "source": pl.Utf8, "origin": pl.Utf8, "target": pl.Utf8, "reason": pl.Utf8,
    "candidates": pl.List(pl.Utf8), "line": pl.Int32, "evidence": pl.List(pl.Utf8),
}))

CHUNK_MENTIONS = Table("chunk_mentions", pl.Schema({
    "source": pl.Utf8, "origin": pl.Utf8, "chunk_id": pl.Utf8, "node_key": pl.Utf8,
}))

GRAPH_ORIGINS = Table("graph_origins", pl.Schema({
    "source": pl.Utf8, "origin": pl.Utf8, "fingerprint": pl.Utf8,
    "extracted_at": pl.Datetime("us"),
}), ("source", "origin"))

# References a source's graph run could not resolve inside the source
# (jarvis_core/sources/references.py), and those the cross_source_links asset could not
# resolve in any source.
_REFERENCE = {
    "source": pl.Utf8, "origin": pl.Utf8, "src": pl.Utf8, "relation": pl.Utf8,
    "kind": pl.Utf8, "target": pl.Utf8, "written": pl.Utf8, "line": pl.Int32,
    "evidence": pl.List(pl.Utf8), "evidence_text": pl.Utf8, "inverse": pl.Boolean,
}
GRAPH_REFERENCES = Table("graph_references", pl.Schema(_REFERENCE))
UNRESOLVED_REFERENCES = Table("unresolved_references", pl.Schema({**_REFERENCE, "reason": pl.Utf8,
                                                                "candidates": pl.List(pl.Utf8)}))

# Vault analytics history (jarvis_core/analytics/): one row per snapshot, its figures as
# JSON, and the per-note rows of each snapshot.
ANALYTICS_SNAPSHOTS = Table("analytics_snapshots", pl.Schema({
    "source": pl.Utf8, "snapshot_id": pl.Utf8, "generated_at": pl.Datetime("us"),
    "content_hash": pl.Utf8, "notes": pl.Int64, "words": pl.Int64, "links": pl.Int64,
    "orphans": pl.Int64, "dead_ends": pl.Int64, "broken_links": pl.Int64,
    "stale_notes": pl.Int64, "communities": pl.Int64, "modularity": pl.Float64,
    "mean_quality": pl.Float64, "compute_seconds": pl.Float64, "figures": pl.Utf8,
}), ("source", "snapshot_id"))

ANALYTICS_NOTES = Table("analytics_notes", pl.Schema({
    "source": pl.Utf8, "snapshot_id": pl.Utf8, "note_key": pl.Utf8, "path": pl.Utf8,
    "title": pl.Utf8, "folder": pl.Utf8, "words": pl.Int64, "headings": pl.Int64,
    "frontmatter": pl.Boolean, "links_out": pl.Int64, "links_in": pl.Int64, "degree": pl.Int64,
    "pagerank": pl.Float64, "community": pl.Int64, "quality": pl.Float64,
    "orphan": pl.Boolean, "dead_end": pl.Boolean, "stale": pl.Boolean,
    "modified_at": pl.Datetime("us"),
}), ("source", "snapshot_id", "note_key"))

SHARED_TABLES = (INGEST_FAILURES, CHUNKS, CHUNKED_DOCUMENTS, DOCUMENTS, GRAPH_NODES, GRAPH_EDGES,
                 BROKEN_LINKS, CHUNK_MENTIONS, GRAPH_ORIGINS, GRAPH_REFERENCES,
                 UNRESOLVED_REFERENCES, ANALYTICS_SNAPSHOTS, ANALYTICS_NOTES)

_SCALARS = {
    pl.Utf8: "VARCHAR", pl.Int64: "BIGINT", pl.Int32: "INTEGER",
    pl.Boolean: "BOOLEAN", pl.Float64: "DOUBLE", pl.Float32: "FLOAT",
}


def duckdb_type(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.List):
        return f"{duckdb_type(dtype.inner)}[]"
    if isinstance(dtype, pl.Struct):
        fields = ", ".join(f'"{f.name}" {duckdb_type(f.dtype)}' for f in dtype.fields)
        return f"STRUCT({fields})"
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMP"
    return _SCALARS[dtype.base_type()]


def ensure_schema(conn: duckdb.DuckDBPyConnection, declared: Iterable[Table]) -> None:
    """Create missing tables and add columns a newer release declares to existing ones
    (their values are filled when the version bump re-processes the rows). The catalog is
    read once: a statement per declared column took a third of a second per run."""
    present: dict[str, set[str]] = {}
    for table, column in conn.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE schema_name = current_schema()").fetchall():
        present.setdefault(table, set()).add(column)
    for table in declared:
        if table.name not in present:
            conn.execute(table.create_sql())
            continue
        for column, dtype in table.schema.items():
            if column not in present[table.name]:
                conn.execute(f'ALTER TABLE {table.name} ADD COLUMN "{column}" '
                             f'{duckdb_type(dtype)}')


def replace_rows(
    conn: duckdb.DuckDBPyConnection,
    table: Table,
    *,
    source: str,
    remove_paths: Iterable[str] | None,
    rows: Iterable[dict],
    key_column: str = "path",
) -> None:
    """Delete a source's rows whose ``key_column`` is in ``remove_paths`` (all of them for
    None), then insert ``rows``, in one transaction so readers never see half a refresh."""
    rows = table.frame(rows)
    remove = pl.DataFrame({"p": sorted(set(remove_paths or ()))}, schema={"p": pl.Utf8})
    try:
        with transaction(conn):
            if remove_paths is None:
                conn.execute(f"DELETE FROM {table.name} WHERE source = ?", [source])
            elif remove.height:
                conn.register("jarvis_remove", remove.to_arrow())
                conn.execute(f'DELETE FROM {table.name} WHERE source = ? AND "{key_column}" IN '
                             "(SELECT p FROM jarvis_remove)", [source])
            if rows.height:
                conn.register("jarvis_rows", rows.to_arrow())
                conn.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM jarvis_rows")
    finally:
        for view in ("jarvis_remove", "jarvis_rows"):
            try:
                conn.unregister(view)
            except duckdb.Error:
                pass


def read_frame(conn: duckdb.DuckDBPyConnection, sql: str,
               params: list | None = None) -> pl.DataFrame:
    return conn.execute(sql, params or []).pl()


def read_dicts(conn: duckdb.DuckDBPyConnection, sql: str, params: list | None = None,
               batch_rows: int = 10_000) -> list[dict]:
    """The rows as dicts, fetched ``batch_rows`` at a time: no columnar copy of the whole
    result beside them, as ``read_frame(...).to_dicts()`` held."""
    return list(iter_dicts(conn, sql, params, batch_rows))


def iter_dicts(conn: duckdb.DuckDBPyConnection, sql: str, params: list | None = None,
               batch_rows: int = 10_000) -> Iterator[dict]:
    """The rows as dicts, ``batch_rows`` fetched at a time, for a caller that keeps less than
    each whole row (the connection is busy until the last is taken)."""
    found = conn.execute(sql, params or [])
    columns = [column[0] for column in found.description]
    while batch := found.fetchmany(batch_rows):
        yield from (dict(zip(columns, row, strict=True)) for row in batch)
