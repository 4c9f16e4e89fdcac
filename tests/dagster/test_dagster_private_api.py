"""The fast instance storages (jarvis_pipeline/instance_storage.py) override private methods
of Dagster's SQLite storages: these tests fail, naming what moved and the way out (``set
instance.fast_storage: false``), when the installed dagster is not what they were written
for; and a refresh refuses to write run history through them then."""

import sys

import dagster
import pytest

from jarvis_pipeline import instance_storage
from jarvis_pipeline.instance import (
    UnfitDagster,
    fast_storage_changes,
    project_instance,
)
from jarvis_pipeline.instance_storage import (  # Dagster's private classes, imported there
    INSTANCE_ATTRIBUTES,
    OVERRIDES,
    SqliteEventLogStorage,
    SqliteRunStorage,
    SqliteScheduleStorage,
    names_added,
)
from tests.pipeline_helpers import name_a_storage, write_config

WAY_OUT = "set instance.fast_storage: false"


def test_dagster_is_what_the_fast_storages_were_written_for():
    changes = fast_storage_changes()
    assert not changes, str(UnfitDagster(changes))


def test_dagster_storages_set_what_the_fast_storages_read_and_nothing_they_add(tmp_path):
    """Attributes set when a storage is built, on storages as Dagster builds them."""
    built = {SqliteRunStorage: SqliteRunStorage.from_local(str(tmp_path / "runs")),
             SqliteScheduleStorage: SqliteScheduleStorage.from_local(str(tmp_path / "ticks")),
             SqliteEventLogStorage: SqliteEventLogStorage(str(tmp_path / "events"))}
    changes = [f"{base.__name__} no longer sets {name}"
               for base, names in INSTANCE_ATTRIBUTES.items() for name in names
               if not hasattr(built[base], name)]
    for ours, base in OVERRIDES.items():
        changes += [f"{base.__name__} now sets a {name} of its own, which the override hides"
                    for name in sorted(names_added(ours) & set(vars(built[base])))]
    for storage in built.values():
        storage.dispose()
    assert not changes, str(UnfitDagster(changes))


SIMULATED_CHANGES = {
    "a minor release": (lambda patch: patch.setattr(dagster, "__version__", "1.14.0"),
                        "dagster 1.14.0 is not 1.13.x"),
    "a new parameter": (lambda patch: patch.setattr(
        SqliteEventLogStorage, "_initdb",
        lambda self, engine, for_index_shard=False, *, retries=10: None),
        "SqliteEventLogStorage._initdb(self, engine, for_index_shard=False, *, retries=10)"),
    "a method gone": (lambda patch: patch.delattr(SqliteEventLogStorage, "path_for_shard"),
                      "SqliteEventLogStorage.path_for_shard missing"),
    "new code in a replaced method": (lambda patch: patch.setattr(
        SqliteEventLogStorage, "_connect", lambda self, shard: None),
        "the code of SqliteEventLogStorage._connect changed"),
    "a name the override adds": (lambda patch: patch.setattr(
        SqliteRunStorage, "_engine", None, raising=False),
        "SqliteRunStorage now has a _engine of its own"),
    "another base class": (lambda patch: patch.setitem(
        instance_storage.BASES, SqliteScheduleStorage, ("SqlScheduleStorage",)),
        "SqliteScheduleStorage now derives from SqlScheduleStorage, ConfigurableClass"),
}


@pytest.mark.parametrize("change", SIMULATED_CHANGES)
def test_a_changed_dagster_is_named_and_refused(tmp_path, monkeypatch, change):
    simulate, named = SIMULATED_CHANGES[change]
    simulate(monkeypatch)
    changes = fast_storage_changes()
    assert named in "; ".join(changes)
    config = write_config(tmp_path / "project", {})
    with pytest.raises(UnfitDagster, match=WAY_OUT) as refused:
        project_instance(config)
    assert named in str(refused.value)


def test_moved_private_modules_are_named_and_refused(tmp_path):
    with pytest.MonkeyPatch.context() as patch:
        patch.delitem(sys.modules, "jarvis_pipeline.instance_storage")
        patch.setitem(sys.modules, "dagster._core.storage.sqlite", None)  # moved away
        [change] = fast_storage_changes()
        with pytest.raises(UnfitDagster, match=WAY_OUT):
            project_instance(write_config(tmp_path / "project", {}))
    assert "the fast storages cannot be imported" in change
    assert "dagster._core.storage.sqlite" in change


def test_without_fast_storage_or_with_a_named_storage_a_changed_dagster_is_used(
        tmp_path, monkeypatch):
    monkeypatch.setattr(dagster, "__version__", "1.14.0")
    stock = write_config(tmp_path / "stock", {}, instance={"fast_storage": False})
    with project_instance(stock) as instance:
        assert type(instance.event_log_storage) is SqliteEventLogStorage
    named = write_config(tmp_path / "named", {})
    name_a_storage(named, tmp_path / "elsewhere")
    with project_instance(named) as instance:
        assert type(instance.event_log_storage) is SqliteEventLogStorage
