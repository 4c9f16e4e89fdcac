"""What a published version holds, store by store, for ``jarvis bench parallel``'s
``identical``: two refreshes of one corpus, however their runs overlapped, must publish the
same content."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import duckdb
import numpy as np

from jarvis_core.stores.serving import current_version

# Columns that record when a run processed something (or how long it took), not what it
# made of the data.
PROCESSING_TIME_COLUMNS = frozenset({"detected_at", "extracted_at", "generated_at",
                                     "ingested_at", "first_seen", "last_seen", "snapshot_id",
                                     "compute_seconds"})
# bf16 keeps 8 significant bits: one rounding moves a component of a unit vector by at most
# 2^-9 of it (< 0.002), and a batch of another composition may round the activations on
# the way differently (padding changes the sequence length a batch is computed at).
# 0.02 allows that on any component and still tells apart any two different texts' vectors.
VECTOR_TOLERANCE = 0.02


def _table_rows(path: Path) -> dict[str, list[tuple]]:
    rows = {}
    with duckdb.connect(str(path), read_only=True) as conn:
        for (table,) in conn.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1"
                                     ).fetchall():
            columns = [name for (name,) in conn.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = $1 "
                "ORDER BY column_index", [table]).fetchall()
                if name not in PROCESSING_TIME_COLUMNS]
            listed = ", ".join(f'"{name}"' for name in columns)
            rows[table] = sorted(map(repr, conn.execute(f'SELECT {listed} FROM "{table}"'
                                                        ).fetchall()))
    return rows


def _keyword_documents(directory: Path) -> dict[str, list[str]]:
    import tantivy

    documents = {}
    for name in ("chunks", "names"):
        index = tantivy.Index.open(str(directory / name))
        searcher = index.searcher()
        hits = searcher.search(tantivy.Query.all_query(), max(searcher.num_docs, 1)).hits
        documents[name] = sorted(repr(sorted(searcher.doc(address).to_dict().items()))
                                 for _, address in hits)
    return documents


def _graph_rows(path: Path) -> dict[str, list[str]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        tables = [name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {table: sorted(map(repr, conn.execute(f'SELECT * FROM "{table}"')))
                for table in tables}


def _vectors(version) -> dict[str, np.ndarray]:
    from jarvis_core.stores.vectors.edge import EdgeVectorStore

    with tempfile.TemporaryDirectory(prefix="jarvis-compare-") as tmp, \
            EdgeVectorStore.open_read_copy(version.vectors_path, Path(tmp) / "copy") as store:
        return store.vectors(store.chunk_ids())


def published_content(data_dir: Path) -> dict:
    """Every store of the current version, in comparable form."""
    version = current_version(data_dir)
    return {"tables": _table_rows(version.tables_path),
            "keyword": _keyword_documents(version.keyword_path),
            "graph": _graph_rows(version.graph_path), "vectors": _vectors(version)}


def compare_contents(first: dict, second: dict) -> dict:
    """Which tables, keyword indexes and graph tables differ, whether the vector ids do, and
    the largest difference of any vector component (within VECTOR_TOLERANCE or not)."""
    differing = [f"{store}:{name}" for store in ("tables", "keyword", "graph")
                 for name in sorted(set(first[store]) | set(second[store]))
                 if first[store].get(name) != second[store].get(name)]
    ids_first, ids_second = set(first["vectors"]), set(second["vectors"])
    largest = max((float(np.max(np.abs(np.asarray(first["vectors"][chunk])
                                       - np.asarray(second["vectors"][chunk]))))
                   for chunk in ids_first & ids_second), default=0.0)
    if ids_first != ids_second:
        differing.append(f"vectors:ids ({len(ids_first ^ ids_second)} differ)")
    if largest > VECTOR_TOLERANCE:
        differing.append(f"vectors:values (largest difference {largest:.4g})")
    return {"differing": differing, "vectors": len(ids_first),
            "largest_vector_difference": largest, "vector_tolerance": VECTOR_TOLERANCE}
