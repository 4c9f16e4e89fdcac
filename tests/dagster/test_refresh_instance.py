"""`jarvis refresh` records its runs and partitions in the instance `jarvis ui` and `jarvis
daemon` use, so a daemon started after a refresh sees every source as known and current:
through the fast storages (``instance.fast_storage``, the default), and through Dagster's
stock ones (``instance.fast_storage: false``), which continue the history the fast ones
wrote."""

import tempfile
from contextlib import contextmanager

import dagster as dg
import pytest

from jarvis_assets.partitions import kind_partitions, source_partitions
from jarvis_core.sources import registry
from jarvis_pipeline import refresh
from jarvis_pipeline.instance import dagster_home, project_instance
from jarvis_pipeline.instance_storage import (
    KeptEngineEventLogStorage,
    KeptEngineRunStorage,
    KeptEngineScheduleStorage,
)
from jarvis_pipeline.refresh import run_refresh
from tests.dagster.sensor_helpers import CHANGE_SENSORS, NOTE, PARTITIONS_SENSOR, make_vault, tick
from tests.pipeline_helpers import name_a_storage, write_config

KEPT_ENGINE_STORAGES = [KeptEngineRunStorage, KeptEngineEventLogStorage,
                        KeptEngineScheduleStorage]
STORAGES = pytest.mark.parametrize("fast_storage", [True, False], ids=["fast", "stock"])


@contextmanager
def dagsters_own_instance(home, monkeypatch):
    """The instance Dagster's own processes (`dagster dev`, the daemon) make of ``home``."""
    with monkeypatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(home))
        instance = dg.DagsterInstance.get()
    with instance:
        yield instance


def storage_types(instance) -> list[type]:
    return [type(instance.run_storage), type(instance.event_log_storage),
            type(instance.schedule_storage)]


def test_a_daemon_after_a_refresh_runs_nothing_again(published_sample, monkeypatch):
    """The sample, refreshed once through the fast storages."""
    with dagsters_own_instance(dagster_home(published_sample), monkeypatch) as instance:
        [latest] = instance.fetch_materializations(dg.AssetKey("raw_notes"), limit=1).records
        assert_a_daemon_runs_nothing_again(published_sample, instance, latest.run_id)


def _jobs(config, source: str) -> list[str]:
    with project_instance(config) as instance:
        return [run.job_name for run in reversed(instance.get_runs(
            filters=dg.RunsFilter(tags={"dagster/partition": source})))]


@pytest.fixture(scope="module")
def small_first_refresh(tmp_path_factory):
    """A small vault's first refresh through the fast storages (the default), its report and
    the jobs it ran read at once: the small-refresh test reads them, the stock-storages test
    continues this project (its history; it edits the vault) instead of refreshing a vault
    of its own first."""
    root = tmp_path_factory.mktemp("small")
    vault = make_vault(root / "vault")
    config = write_config(root / "project", {"notes": vault})
    report = run_refresh(config)
    return {"vault": vault, "config": config, "report": report, "jobs": _jobs(config, "notes")}


def test_a_refresh_on_dagsters_stock_storages_continues_the_history(small_first_refresh,
                                                                    monkeypatch):
    """Switching ``instance.fast_storage`` off re-runs no source; the next refresh writes
    through Dagster's own storages after the fast ones."""
    vault = small_first_refresh["vault"]
    assert small_first_refresh["report"]["ok"]
    config = write_config(small_first_refresh["config"].config_path.parent, {"notes": vault},
                          instance={"fast_storage": False})
    (vault / NOTE).write_text((vault / NOTE).read_text() + "\nAnd a spare battery.\n")
    report = run_refresh(config)
    assert report["ok"], report
    assert report["reasons"] == {"notes": "notes 1 changed"}
    [entry] = report["sources"]
    with project_instance(config) as instance:  # what the refresh wrote through
        assert not set(storage_types(instance)) & set(KEPT_ENGINE_STORAGES)
    with dagsters_own_instance(dagster_home(config), monkeypatch) as instance:
        assert len(instance.get_runs(filters=dg.RunsFilter(
            tags={"dagster/partition": "notes"}))) == 4  # ingest and later layers, twice
        assert_a_daemon_runs_nothing_again(config, instance, entry["run_id"])


def test_a_small_refresh_is_two_runs_a_large_one_publishes_before_its_embeddings(
        small_first_refresh, tmp_path, monkeypatch):
    """A source's ingestion, then its later layers in one run; when many documents moved
    (here: the thresholds lowered), everything but the embeddings, a first publish, then
    the embeddings."""
    report = small_first_refresh["report"]
    assert report["ok"] and report["partial"] is None
    assert small_first_refresh["jobs"] == ["ingest_vault", "refresh_sources"]
    monkeypatch.setattr(refresh, "PROGRESSIVE_DOCUMENTS", 1)
    monkeypatch.setattr(refresh, "PROGRESSIVE_CHUNKS", 1)
    large = write_config(tmp_path / "large", {"notes": make_vault(tmp_path / "b")})
    report = run_refresh(large)
    assert report["ok"] and report["partial"]["ok"], report
    assert _jobs(large, "notes") == ["ingest_vault", "index_sources", "embed_sources"]
    assert report["seconds"]["first_published"] <= report["seconds"]["published"]


def assert_a_daemon_runs_nothing_again(config, instance, run_id: str) -> None:
    """The refresh's run, partitions and events are where a daemon on ``instance`` reads
    them: it finds every source known and current."""
    [source] = config.source_names
    assert instance.get_dynamic_partitions(source_partitions.name) == [source]
    assert instance.get_dynamic_partitions(kind_partitions(registry.kind("vault")).name) == [
        source]
    for sensor in (PARTITIONS_SENSOR, CHANGE_SENSORS["vault"]):  # no cursor yet
        assert not tick(sensor, config, instance, None).run_requests
    [latest] = instance.fetch_materializations(dg.AssetKey("raw_notes"), limit=1).records
    assert (latest.partition_key, latest.run_id) == (source, run_id)
    steps = {event.step_key for event in instance.all_logs(run_id)
             if event.dagster_event_type == dg.DagsterEventType.STEP_SUCCESS}
    assert "raw_notes" in steps  # the run's own file reads back


def test_the_project_instance_keeps_its_engines_on_dagsters_sqlite_files(tmp_path):
    config = write_config(tmp_path / "project", {})
    with project_instance(config) as instance:
        assert storage_types(instance) == KEPT_ENGINE_STORAGES
        home = config.data_dir / "dagster"
        assert (home / "history" / "runs.db").is_file()
        assert (home / "schedules" / "schedules.db").is_file()
        events = instance.event_log_storage
        with events.run_connection("one"):
            pass
        engine = events._engines["one"]
        for run_id in ("one", *(f"run-{n}" for n in range(20)), "one"):
            with events.run_connection(run_id):
                pass
        assert len(events._engines) == 8 and events._engines["one"] is not engine


def test_new_run_files_are_copies_of_a_template_held_in_memory(tmp_path, monkeypatch):
    """Nothing is left in the temporary folder, so a refresh killed later leaks nothing."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr(KeptEngineEventLogStorage, "_template", None)
    config = write_config(tmp_path / "project", {})
    with project_instance(config) as instance:
        events = instance.event_log_storage
        for run_id in ("first", "second"):
            with events.run_connection(run_id):
                pass
        template = KeptEngineEventLogStorage._template
        runs = config.data_dir / "dagster" / "history" / "runs"
        assert (runs / "first.db").read_bytes() == template
        assert events.has_table("event_logs")
    assert template and list(scratch.iterdir()) == []


def test_without_fast_storage_the_instance_is_the_one_dagster_makes(tmp_path, monkeypatch):
    config = write_config(tmp_path / "project", {}, instance={"fast_storage": False})
    home = dagster_home(config)
    with project_instance(config) as ours, dagsters_own_instance(home, monkeypatch) as own:
        assert but_output(ours) == but_output(own)
        assert storage_types(ours) == storage_types(own)
        assert not set(storage_types(ours)) & set(KEPT_ENGINE_STORAGES)


@STORAGES
def test_a_home_whose_settings_name_a_storage_keeps_it(tmp_path, monkeypatch, fast_storage):
    config = write_config(tmp_path / "project", {}, instance={"fast_storage": fast_storage})
    name_a_storage(config, tmp_path / "elsewhere")
    home = dagster_home(config)
    with project_instance(config) as ours, dagsters_own_instance(home, monkeypatch) as own:
        assert but_output(ours) == but_output(own)
    assert (tmp_path / "elsewhere" / "history" / "runs.db").is_file()


def but_output(instance):
    """The instance's settings but how it captures its runs' output."""
    return instance.get_ref()._replace(compute_logs_data=None)


def test_a_refreshs_runs_leave_their_output_to_the_terminal(tmp_path):
    """No output capture (a `tail` and a watcher process per run) unless dagster.yaml names
    one; `jarvis ui` and the daemon read dagster.yaml themselves and keep Dagster's."""
    config = write_config(tmp_path / "project", {})
    with project_instance(config) as instance:
        assert type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"
    settings = dagster_home(config) / "dagster.yaml"
    settings.write_text(settings.read_text() + "compute_logs:\n  module: "
                        "dagster._core.storage.local_compute_log_manager\n"
                        "  class: LocalComputeLogManager\n  config:\n"
                        f"    base_dir: {tmp_path / 'logs'}\n")
    with project_instance(config) as instance:
        assert type(instance.compute_log_manager).__name__ == "LocalComputeLogManager"
