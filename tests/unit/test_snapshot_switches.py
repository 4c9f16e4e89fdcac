"""A serving process switching versions: a snapshot a request still reads stays open however
many versions are published meanwhile (parallel source refreshes publish in quick
succession), and is closed once it has been retired long enough."""

import duckdb
import pytest

from jarvis_core.stores import serving
from jarvis_query import snapshot as snapshot_module
from jarvis_query.snapshot import SnapshotProvider
from tests.pipeline_helpers import write_config


def publish(data_dir, chunks: int) -> str:
    name, staging = serving.begin_version(data_dir)
    with duckdb.connect(str(staging / serving.SERVING_TABLES_FILE)) as tables:
        tables.execute("CREATE TABLE chunks AS SELECT range AS n FROM range(?)", [chunks])
    serving.commit_version(data_dir, name, staging, {"model": "m", "chunks": chunks})
    return name


def chunks(snapshot) -> int:
    return snapshot.cursor().execute("SELECT count(*) FROM chunks").fetchone()[0]


@pytest.fixture
def provider(tmp_path):
    (tmp_path / "vault").mkdir()
    config = write_config(tmp_path / "project", {"notes": tmp_path / "vault"})
    publish(config.data_dir, 1)
    snapshots = SnapshotProvider(config)
    yield snapshots
    snapshots.close()


def test_a_snapshot_in_use_survives_two_publishes(provider):
    in_use = provider.current()
    for count in (2, 3):  # the second publish also prunes the first version's folder
        publish(provider.config.data_dir, count)
        assert chunks(provider.current()) == count
    assert chunks(in_use) == 1


def test_a_snapshot_retired_long_enough_is_closed_at_the_next_switch(provider, monkeypatch):
    monkeypatch.setattr(snapshot_module, "RETIRED_OPEN_SECONDS", 0)
    first = provider.current()
    for count in (2, 3):
        publish(provider.config.data_dir, count)
        provider.current()
    with pytest.raises(duckdb.ConnectionException):
        chunks(first)
