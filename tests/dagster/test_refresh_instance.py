"""`jarvis refresh` records its runs and partitions in the instance `jarvis ui` and `jarvis
daemon` use, so a daemon started after a refresh sees every source as known and current."""

import tempfile

import dagster as dg
import yaml
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

from jarvis_assets.partitions import source_partitions
from jarvis_pipeline.instance import dagster_home, project_instance
from jarvis_pipeline.instance_storage import (
    KeptEngineEventLogStorage,
    KeptEngineRunStorage,
    KeptEngineScheduleStorage,
)
from sensors.source_partitions import source_partitions_sensor
from sensors.vault_changes import vault_changes_sensor
from tests.dagster.sensor_helpers import tick
from tests.pipeline_helpers import write_config


def test_a_daemon_after_a_refresh_runs_nothing_again(published_sample):
    home = dagster_home(published_sample)
    assert home == published_sample.data_dir / "dagster"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_runs(filters=dg.RunsFilter(
            tags={"dagster/partition": "sample"}))  # the refresh's runs are in it
        assert instance.get_dynamic_partitions(source_partitions.name) == ["sample"]
        for sensor in (source_partitions_sensor, vault_changes_sensor):  # no cursor yet
            assert not tick(sensor, published_sample, instance, None).run_requests
        [latest] = instance.fetch_materializations(dg.AssetKey("raw_notes"), limit=1).records
        assert latest.partition_key == "sample"  # asset events written through kept engines
        steps = {event.step_key for event in instance.all_logs(latest.run_id)
                 if event.dagster_event_type == dg.DagsterEventType.STEP_SUCCESS}
        assert "raw_notes" in steps  # and the run's own file, begun as a copy, reads back


def test_the_project_instance_keeps_its_engines_on_dagsters_sqlite_files(tmp_path):
    config = write_config(tmp_path / "project", {})
    with project_instance(config) as instance:
        storages = (instance.run_storage, instance.event_log_storage,
                    instance.schedule_storage)
        assert [type(storage) for storage in storages] == [
            KeptEngineRunStorage, KeptEngineEventLogStorage, KeptEngineScheduleStorage]
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


def test_a_home_whose_settings_name_a_storage_keeps_it(tmp_path):
    config = write_config(tmp_path / "project", {})
    home = dagster_home(config)
    settings = yaml.safe_load((home / "dagster.yaml").read_text())
    settings["storage"] = {"sqlite": {"base_dir": str(tmp_path / "elsewhere")}}
    (home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    with project_instance(config) as instance:
        assert type(instance.event_log_storage) is SqliteEventLogStorage
    assert (tmp_path / "elsewhere" / "history" / "runs.db").is_file()
