"""A source's graph through the graph sync as knowledge_graph runs it (DuckDB tables in
memory, an SQLite graph store), a given number of documents at a time, and what it wrote."""

import sqlite3
from contextlib import nullcontext
from datetime import datetime

from jarvis_core.graph.sync import GraphRun, sync_graph
from jarvis_core.settings import GraphSettings
from jarvis_core.sources import registry
from jarvis_core.sources.extraction import GraphExtractor
from jarvis_core.stores import tables

NOW = datetime(2026, 11, 1)


def write_rows(conn, source: str, written: dict[str, list[dict]]) -> None:
    """Replace the source's rows of each named table."""
    for name, rows in written.items():
        tables.replace_rows(conn, registry.table(name), source=source, remove_paths=None,
                            rows=[{**row, "source": source} for row in rows])


def synced(conn, store, source: str, extractor: GraphExtractor, batch_documents: int,
           settings=None) -> GraphRun:
    """The sync of the source's stored rows, ``batch_documents`` documents at a time."""
    return sync_graph(source, extractor, lambda rows, chunks: extractor.extract(
        source, settings, GraphSettings(), rows, chunks), lambda: nullcontext(conn), store,
        now=NOW, batch_documents=batch_documents, batch_rows=1000)


def graph_rows(conn, store) -> dict:
    """Everything the sync wrote, but the times."""
    found = {table: sorted(conn.execute(f"SELECT * EXCLUDE ({times}) FROM {table}").fetchall())
             for table, times in (("graph_edges", "source"),
                                  ("graph_nodes", "first_seen, last_seen"),
                                  ("graph_origins", "extracted_at"),
                                  ("chunk_mentions", "source"), ("graph_references", "source"),
                                  ("graph_broken_links", "source"))}
    with sqlite3.connect(store.path) as graph_file:
        for table in ("nodes", "edges"):
            found[f"store {table}"] = sorted(graph_file.execute(f"SELECT * FROM {table}"))
    return found
