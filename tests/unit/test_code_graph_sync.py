"""A repository's code graph through the graph sync as the knowledge_graph asset runs it
(DuckDB tables, the repository extractor's queries, fingerprints, an SQLite graph store):
a second run rewrites nothing, a moved callee rewrites the files it concerns, a deleted
file leaves the store."""

from contextlib import nullcontext
from datetime import UTC, datetime
from types import SimpleNamespace

import duckdb
import pytest

from jarvis_core.graph.sync import sync_graph
from jarvis_core.settings import GraphSettings
from jarvis_core.sources import registry
from jarvis_core.sources.repo.graph import EXTRACTOR
from jarvis_core.stores import tables
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from tests.unit.test_code_graph import REPO, f, ref, s, sym


@pytest.fixture
def synced(tmp_path):
    with duckdb.connect() as conn, SqliteGraphStore(tmp_path / "graph.sqlite") as store:
        tables.ensure_schema(conn, registry.declared_tables())
        yield conn, store


def write_code(conn, paths, symbols, references) -> None:
    for name, rows in (("repo_files", [{"path": p, "language": "Python"} for p in paths]),
                       ("code_files", [{"path": p, "language": "python"} for p in paths]),
                       ("code_symbols", symbols), ("code_references", references)):
        tables.replace_rows(conn, registry.table(name), source=REPO, remove_paths=None,
                            rows=[{**row, "source": REPO} for row in rows])


def refresh(conn, store):
    """What knowledge_graph does for one source (without similarity edges)."""
    def extract(rows, chunk_rows):
        return EXTRACTOR.extract(REPO, SimpleNamespace(knowledge_dir=".jarvis"),
                                 GraphSettings(), rows, chunk_rows)

    run = sync_graph(REPO, EXTRACTOR, extract, lambda: nullcontext(conn), store,
                     now=datetime.now(UTC), batch_documents=100,
                     batch_rows=2)  # rows written two at a time: each table in several batches
    assert run.dangling == 0  # nothing dangles
    assert rows_of(conn, "graph_nodes") == run.nodes
    return run


def rows_of(conn, table: str) -> int:
    return conn.execute(f"SELECT count(*) FROM {table} WHERE source = ?", [REPO]).fetchone()[0]


def callees(store, key) -> set[str]:
    return {node.key for node in store.targets([key], "CALLS").get(key, [])}


def test_code_graph_refreshes_file_by_file(synced):
    conn, store = synced
    paths = ["a.py", "b.py", "c.py", "d.py"]
    calls = [ref("a.py", "call", "helper", scope="run", line=2)]
    kept = [sym("a.py", "run"), sym("d.py", "alone")]
    write_code(conn, paths, [*kept, sym("b.py", "helper")], calls)
    first = refresh(conn, store)
    assert first.changed == {f(p) for p in paths}
    assert rows_of(conn, "graph_edges") == first.edges_written > 2
    assert rows_of(conn, "graph_origins") == len(first.changed)
    assert callees(store, s("a.py", "run")) == {s("b.py", "helper")}

    assert refresh(conn, store).changed == set()  # the store is in sync: nothing to rewrite

    write_code(conn, paths, [*kept, sym("c.py", "helper")], calls)
    moved = refresh(conn, store)
    assert moved.changed == {f("a.py"), f("b.py"), f("c.py")} and not moved.removed
    assert callees(store, s("a.py", "run")) == {s("c.py", "helper")}
    assert store.node(s("b.py", "helper")) is None  # no edge touches it any more

    write_code(conn, paths[:3], [sym("a.py", "run"), sym("c.py", "helper")], calls)
    gone = refresh(conn, store)
    assert gone.removed == {f("d.py")} and gone.changed == set()
    assert store.node(s("d.py", "alone")) is None and store.node(f("d.py")) is None
    assert conn.execute("SELECT count(*) FROM graph_origins WHERE origin = ?",
                        [f("d.py")]).fetchone() == (0,)
