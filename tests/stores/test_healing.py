"""Working stores heal from the tables: a damaged Qdrant Edge shard, Tantivy index or SQLite
graph is rebuilt, a source a store lost comes back, a damaged DuckDB file is named with
what to do, the analytics history outlives its tables file, stale staging folders go."""

import json
import logging
import os
import shutil
import sqlite3
import time
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from jarvis_core.analytics.backup import back_up_history, restore_history
from jarvis_core.embedding_backends import OPENVINO
from jarvis_core.settings import CACHE_ENV
from jarvis_core.sources import registry
from jarvis_core.stores import serving, tables
from jarvis_core.stores.connections import TablesDamaged, read_only
from jarvis_core.stores.healing import (
    open_graph_store,
    open_healed,
    open_keyword_index,
    open_vector_store,
    sqlite_damage,
)
from jarvis_core.stores.keys import note_key
from jarvis_core.stores.keyword import CHUNKS_DIR, KeywordSearcher
from jarvis_core.stores.vectors.base import VectorStoreBusy
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_core.text.embedder import Embedder

MODEL = "all-MiniLM-L6-v2"
TEXTS = {"alpha": ["Retries back off exponentially.", "Idempotency keys make writes safe."],
         "beta": ["Shakshuka needs eggs and tomatoes.", "Sourdough rises overnight.",
                  "Coffee is best fresh."]}


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The model through OpenVINO as the session converted it: what heals is the store, so no
    torch to load for it."""
    return Embedder(MODEL, backend=OPENVINO, cache_dir=Path(os.environ[CACHE_ENV]))


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """Tables holding chunks of two sources and a small graph, published once."""
    data = tmp_path / "data"
    data.mkdir()
    with duckdb.connect(str(data / "jarvis.duckdb")) as conn:
        tables.ensure_schema(conn, registry.declared_tables())
        chunks = [{"chunk_id": f"{source[0] * 2}{index:030x}", "source": source,
                   "source_type": "note", "doc_key": note_key(source, f"n{index}.md"),
                   "path": f"n{index}.md", "title": f"Note {index}", "position": 0,
                   "heading_path": [], "context": f"Note {index}", "text": text,
                   "token_count": 8, "char_start": 0, "char_end": len(text), "doc_hash": "h"}
                  for source, texts in TEXTS.items() for index, text in enumerate(texts)]
        tables.replace_rows(conn, registry.table("chunks"), source="alpha", remove_paths=None,
                            rows=chunks)
        now = datetime(2026, 10, 1)
        nodes = [{"source": "alpha", "node_key": key, "type": kind, "title": key,
                  "node_source": "alpha" if kind == "note" else None, "properties": "{}",
                  "first_seen": now, "last_seen": now}
                 for key, kind in ((note_key("alpha", "n0.md"), "note"),
                                   (note_key("alpha", "n1.md"), "note"), ("tag:ops", "tag"))]
        edges = [{"edge_key": f"e{i}", "source": "alpha", "origin": nodes[0]["node_key"],
                  "src": nodes[0]["node_key"], "dst": dst, "relation": relation,
                  "confidence": "explicit", "extractor": "wikilink", "evidence": ["c"],
                  "evidence_text": "[[n1]] #ops", "weight": 1.0}
                 for i, (dst, relation) in enumerate(((nodes[1]["node_key"], "LINKS_TO"),
                                                      ("tag:ops", "TAGGED"),
                                                      ("note:gone/x.md", "LINKS_TO")))]
        for table, rows in (("graph_nodes", nodes), ("graph_edges", edges)):
            tables.replace_rows(conn, registry.table(table), source="alpha", remove_paths=None,
                                rows=rows)
    name, staging = serving.begin_version(data)
    serving.commit_version(data, name, staging, {
        "collection": "c", "vectors": {"alpha": 2, "beta": 3}, "keyword": {"alpha": 2,
                                                                          "beta": 3}})
    return data


def _connect(data_dir: Path):
    return lambda: duckdb.connect(str(data_dir / "jarvis.duckdb"))


def _vectors(data_dir: Path, embedder, caplog) -> EdgeVectorStore:
    directory = data_dir / "vectors" / "c"
    return open_vector_store(lambda: EdgeVectorStore(data_dir / "vectors", "c", 384, MODEL),
                             "c", directory, data_dir, _connect(data_dir), embedder,
                             logging.getLogger("test.healing"))


def test_deleted_qdrant_segments_are_rebuilt_from_the_chunks(data_dir, embedder, caplog):
    caplog.set_level(logging.WARNING)
    with _vectors(data_dir, embedder, caplog) as store:  # empty: both published sources back
        assert store.check() == {"alpha": 2, "beta": 3}
    shutil.rmtree(data_dir / "vectors" / "c" / "part-0000" / "segments")
    with EdgeVectorStore(data_dir / "vectors", "c", 384, MODEL) as broken:
        with pytest.raises(Exception, match="No appropriate index for faceting"):
            broken.check()
    caplog.clear()
    started = time.perf_counter()
    with _vectors(data_dir, embedder, caplog) as store:
        print(f"vector store rebuilt in {time.perf_counter() - started:.2f} s")
        assert store.check() == {"alpha": 2, "beta": 3}
        [hit] = store.search(embedder.embed(["safe writes with idempotency"])[0], limit=1)
        assert hit.payload["source"] == "alpha" and hit.payload["path"] == "n1.md"
    assert "failed its integrity check" in caplog.text and str(data_dir / "vectors") in caplog.text


def test_a_busy_or_foreign_store_is_raised_never_dropped(tmp_path):
    def busy():
        raise VectorStoreBusy("held by another process")

    dropped = []
    with pytest.raises(VectorStoreBusy):
        open_healed("vector store", tmp_path, busy, dict, lambda: dropped.append(1), dict,
                    lambda store, sources: None, lambda exc: not isinstance(exc, VectorStoreBusy))
    assert dropped == []


def test_a_damaged_keyword_index_is_rebuilt_from_the_chunks(data_dir, caplog):
    directory = data_dir / "keyword"
    with open_keyword_index(directory, data_dir, _connect(data_dir)) as index:
        assert index.counts() == {"alpha": 2, "beta": 3}
    for segment in (directory / CHUNKS_DIR).glob("*.idx"):
        segment.unlink()
    caplog.set_level(logging.WARNING)
    with open_keyword_index(directory, data_dir, _connect(data_dir)) as index:
        assert index.counts() == {"alpha": 2, "beta": 3}
        index.publish_copy(data_dir / "published-keyword")
    assert "keyword index" in caplog.text and "failed its integrity check" in caplog.text
    [hit] = KeywordSearcher(data_dir / "published-keyword").search("sourdough", limit=5)
    assert hit.chunk_id.startswith("bb")


def test_a_graph_file_that_is_no_database_is_rebuilt_from_the_graph_tables(data_dir, caplog):
    path = data_dir / "graph" / "graph.sqlite"
    with open_graph_store(path, _connect(data_dir)) as store:  # empty: filled from the tables
        assert store.counts()["edges"] == {"LINKS_TO": 1, "TAGGED": 1}  # dangling one left out
    path.write_bytes(b"not a database" * 500)
    caplog.set_level(logging.WARNING)
    with open_graph_store(path, _connect(data_dir)) as store:
        assert store.check() == {"alpha": 2}
        assert {node.key for node in store.neighbourhood(note_key("alpha", "n0.md"), 1).nodes} \
            == {note_key("alpha", "n0.md"), note_key("alpha", "n1.md"), "tag:ops"}
    assert "graph store" in caplog.text and "failed its integrity check" in caplog.text


def test_a_graph_file_another_connection_writes_is_opened_not_dropped(data_dir):
    path = data_dir / "graph" / "graph.sqlite"
    open_graph_store(path, _connect(data_dir)).close()
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # a writer at work (WAL: readers go on)
    try:
        with open_graph_store(path, _connect(data_dir)) as store:
            assert store.check() == {"alpha": 2}
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert not sqlite_damage(sqlite3.OperationalError("database is locked"))
    assert sqlite_damage(sqlite3.DatabaseError("file is not a database"))


def test_a_damaged_tables_file_is_named_with_what_to_do(tmp_path):
    database = tmp_path / "jarvis.duckdb"
    database.write_bytes(b"not duckdb" * 1000)
    with pytest.raises(TablesDamaged, match="damaged, not locked") as raised:
        with read_only(database):
            pass
    assert str(database) in str(raised.value)


def test_the_analytics_history_outlives_its_tables_file(tmp_path):
    backup = tmp_path / "backup"
    with duckdb.connect(str(tmp_path / "old.duckdb")) as conn:
        tables.ensure_schema(conn, registry.declared_tables())
        for number in range(3):
            conn.execute("INSERT INTO analytics_snapshots (source, snapshot_id, generated_at, "
                         "figures) VALUES ('v', ?, ?, '{}')",
                         [f"s{number}", datetime(2026, 10, 1 + number)])
            conn.execute("INSERT INTO analytics_notes (source, snapshot_id, note_key, path) "
                         "VALUES ('v', ?, 'note:v/a.md', 'a.md')", [f"s{number}"])
        back_up_history(conn, backup)
    with duckdb.connect(str(tmp_path / "new.duckdb")) as conn:  # the rebuilt file
        tables.ensure_schema(conn, registry.declared_tables())
        assert restore_history(conn, backup) == 3
        assert conn.execute("SELECT snapshot_id FROM analytics_notes").fetchall() == [("s2",)]
        assert restore_history(conn, backup) == 0  # a file with history is left alone


def test_staging_folders_left_by_a_killed_publish_are_removed(tmp_path):
    root = serving.serving_root(tmp_path)
    (root / ".staging-20260101T000000000000Z-dead00" / "vectors").mkdir(parents=True)
    (root / ".CURRENT-20260101T000000000000Z-dead00").write_text("x")
    live_name, live = serving.begin_version(tmp_path)  # a publisher still at work
    assert sorted(p.name for p in root.iterdir()) == [f".staging-{live_name}",
                                                      f".staging-{live_name}.lock"]
    assert serving.remove_stale_staging(tmp_path) == []  # its lock is held
    version = serving.commit_version(tmp_path, live_name, live, {"x": 1})
    assert sorted(os.listdir(root)) == sorted(["CURRENT", version.name])
    assert json.loads((version.path / "manifest.json").read_text())["x"] == 1


def test_a_graph_file_this_process_closed_unchanged_is_not_read_whole_again(tmp_path):
    """SQLite's structural check reads the whole file: a refresh opening the store again
    skips it while the file is as this process closed it, and runs it once it changed."""
    from jarvis_core.stores.graph.sqlite import SqliteGraphStore

    path = tmp_path / "graph.sqlite"

    def checked_whole() -> bool:
        store = SqliteGraphStore(path)
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        try:
            store.check()
        finally:
            store.close()
        return any("quick_check" in statement for statement in statements)

    assert checked_whole()
    assert not checked_whole()
    with sqlite3.connect(path) as other:  # another process's write
        other.execute("INSERT INTO nodes (key, type, title, source, properties) "
                      "VALUES ('n', 'note', 'N', 's', '{}')")
    assert checked_whole()
    assert not checked_whole()
