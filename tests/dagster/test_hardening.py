"""Hardening through real refreshes: nothing outside a vault reaches any store, damaged
working stores are repaired by the next refresh, a damaged tables file fails with its name
and what to do, and the analytics history outlives a rebuilt tables file."""

import os
import shutil
import time

import dagster as dg
import numpy as np
import pytest

from jarvis_core.sources.confinement import OUTSIDE_SOURCE
from jarvis_core.stores import serving
from jarvis_core.stores.connections import read_only
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_core.stores.keyword import CHUNKS_DIR, KeywordSearcher
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_pipeline.refresh import run_refresh
from tests.pipeline_helpers import private_copy, rows, run, write_config

pytestmark = pytest.mark.slow
SECRET_WORDS = ("zebracorn", "quokkafest", "root:x:0:0")


def _vault(tmp_path):
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.md").write_text("# Zebracorn plans\n\nzebracorn launch code 7731\n")
    (outside / "deep" / "inner.md").write_text("# Quokka\n\nquokkafest [[Retries]]\n")
    vault = tmp_path / "vault"
    (vault / "Bad").mkdir(parents=True)
    (vault / "Retries.md").write_text("# Retries\n\nRetries back off exponentially. #ops\n")
    (vault / "Writes.md").write_text("# Writes\n\nIdempotency keys make [[Retries]] safe.\n")
    os.symlink(outside / "secret.md", vault / "Bad" / "secret.md")
    os.symlink(outside, vault / "Linked")
    os.symlink("/etc/passwd", vault / "Bad" / "passwd.md")
    return vault


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory):
    """The vault with links out of it, refreshed once for the module; each test works on a
    ``private_copy`` of it (``project``)."""
    root = tmp_path_factory.mktemp("hardening")
    config = write_config(root / "project", {"v": _vault(root)})
    report = run_refresh(config)
    assert report["ok"], report
    return config


@pytest.fixture
def project(refreshed, tmp_path):
    """A private copy of the refreshed project, free to damage and refresh."""
    return private_copy(refreshed, tmp_path)


def _collection(config):
    [directory] = [p for p in config.vectors_path.iterdir() if p.is_dir()]
    return directory


def test_nothing_outside_the_vault_reaches_any_store(project, tmp_path):
    failures = dict(rows(project, "SELECT path, reason FROM ingest_failures"))
    assert failures == {"Bad/secret.md": OUTSIDE_SOURCE, "Bad/passwd.md": OUTSIDE_SOURCE,
                        "Linked": OUTSIDE_SOURCE}
    version = serving.current_version(project.data_dir)
    for database in (project.duckdb_path, version.tables_path):
        with read_only(database) as conn:
            for (table,) in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall():
                for word in SECRET_WORDS:
                    (found,) = conn.execute(f"SELECT count(*) FROM {table} t WHERE "
                                            "t::VARCHAR ILIKE ?", [f"%{word}%"]).fetchone()
                    assert found == 0, (database, table, word)
    searcher = KeywordSearcher(version.keyword_path)
    for word in ("zebracorn", "quokkafest", "daemon usr sbin nologin", "secret", "passwd"):
        assert searcher.search(word, limit=10) == [] and searcher.search_names(word) == []
    assert searcher.search("idempotency", limit=10)  # the vault itself is searchable
    store = EdgeVectorStore.open_read_copy(version.vectors_path, tmp_path / "read-copy")
    with store:
        payloads = [hit.payload for hit in store.search(np.ones(store.dimension), limit=100)]
    assert {p["path"] for p in payloads} == {"Retries.md", "Writes.md"}
    with SqliteGraphStore.open_read_only(version.graph_path) as graph:
        nodes = graph.counts()["nodes"]
        assert nodes.get("note") == 2
        keys = {n.key for n in graph.neighbourhood("note:v/Retries.md", 3).nodes}
    assert not any(word in key.lower() for key in keys for word in ("secret", "linked",
                                                                     "passwd", "quokka"))


def test_damaged_stores_are_repaired_by_the_next_refresh(project, capsys):
    collection = _collection(project)
    shutil.rmtree(collection / "part-0000" / "segments")         # Qdrant Edge segments gone
    for segment in (project.keyword_path / CHUNKS_DIR).glob("*.idx"):
        segment.unlink()                                         # a Tantivy segment file gone
    project.graph_path.write_bytes(b"garbage" * 1000)            # not a database any more
    stale = serving.serving_root(project.data_dir) / ".staging-19990101T000000000000Z-dead00"
    (stale / "vectors").mkdir(parents=True)                      # a killed publish's leftovers
    vault = next(iter(project.sources_of("vault").values())).path
    (vault / "Writes.md").write_text("# Writes\n\nIdempotency keys make [[Retries]] safe "
                                     "to repeat.\n")
    started = time.perf_counter()
    report = run_refresh(project)
    with capsys.disabled():
        print(f"\nrefresh repairing vectors, keyword index and graph: "
              f"{time.perf_counter() - started:.1f} s")
    assert report["ok"], report
    manifest = serving.current_version(project.data_dir).manifest
    assert manifest["vectors_complete"] and manifest["vectors"] == {"v": manifest["chunks"]}
    assert manifest["keyword"] == {"v": manifest["chunks"]}
    assert not stale.exists()
    with EdgeVectorStore(project.vectors_path, collection.name, 384,
                         manifest["model"]) as store:
        assert store.check() == {"v": manifest["chunks"]}
    with SqliteGraphStore(project.graph_path) as graph:
        assert graph.check() == {"v": 2}


def test_a_damaged_tables_file_fails_the_run_naming_it(project):
    project.duckdb_path.write_bytes(b"not duckdb at all" * 1000)
    with dg.DagsterInstance.ephemeral() as instance:
        result = run(project, "v", instance, raise_on_error=False)
    assert not result.success
    messages = " ".join(_messages(event.event_specific_data.error)
                        for event in result.all_events if event.is_failure)
    assert str(project.duckdb_path) in messages and "Move it aside" in messages


def _messages(error) -> str:
    """An error's message and those of its causes."""
    return "" if error is None else f"{error.message} {_messages(error.cause)}"


def test_the_analytics_history_survives_a_rebuilt_tables_file(project):
    [(before,)] = rows(project, "SELECT count(*) FROM analytics_snapshots")
    project.duckdb_path.rename(project.duckdb_path.with_name("jarvis.duckdb.damaged"))
    report = run_refresh(project, only=["v"])
    assert report["ok"], report
    [(after,)] = rows(project, "SELECT count(*) FROM analytics_snapshots")
    assert before >= 1 and after == before + 1
