"""The source partitions and vault change sensors: partitions follow the configuration, a
vault run only for real note changes, one per change, with tags that say what changed."""

import json
import os
import warnings

import dagster as dg
import pytest
from sensors.export_changes import export_changes_sensor
from sensors.vault_changes import vault_changes_sensor

import sensors
from jarvis_assets.partitions import source_partitions
from sensors.source_partitions import source_partitions_sensor
from tests.dagster.sensor_helpers import (
    NOTE,
    apply,
    make_export,
    make_repo,
    make_vault,
    publish,
    record_run,
    tick,
    write_config,
)

SENSORS = {"source_partitions_sensor": 30, "vault_changes_sensor": 30,
           "repo_changes_sensor": 60, "ticket_exports_sensor": 30,
           "mail_changes_sensor": 30, "confluence_exports_sensor": 30,
           "automation_condition_sensor": 30, "run_failure_notices": 30}


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


@pytest.fixture
def vault(tmp_path):
    return make_vault(tmp_path / "vault")


@pytest.fixture
def config(tmp_path, vault):
    return write_config(tmp_path / "project", {"sample": vault})


@pytest.fixture
def published(config):
    """The vault as its last refresh published it."""
    publish(config)
    return config


def settled(config, instance) -> str:
    """The cursor of a vault sensor that has seen the published state: no run."""
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    result = tick(vault_changes_sensor, config, instance)
    assert result.run_requests == []
    return result.cursor


def test_every_sensor_is_found_in_the_package_described_and_running():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        found = dg.load_definitions_from_package_module(sensors)
    loaded = {sensor.name: sensor for sensor in found.sensors}
    assert {name: sensor.minimum_interval_seconds for name, sensor in loaded.items()} == SENSORS
    assert all(sensor.description for sensor in loaded.values())
    assert {sensor.default_status for sensor in loaded.values()} == {
        dg.DefaultSensorStatus.RUNNING}


def test_an_export_sensor_needs_a_configuration_section():
    with pytest.raises(ValueError, match="calendar_sensor: the configuration has no "
                                         "'calendar' section"):
        export_changes_sensor("calendar_sensor", "calendar", list, files_table="x_files")


# --- source partitions ---------------------------------------------------------------------

def test_new_sources_of_every_kind_are_registered_with_a_first_run(tmp_path, vault, instance):
    config = write_config(tmp_path / "project", {"sample": vault},
                          repos={"code": str(make_repo(tmp_path / "code"))},
                          tickets={"issues": {"path": str(make_export(tmp_path / "issues"))}})
    result = tick(source_partitions_sensor, config, instance)
    [add] = result.dynamic_partitions_requests
    assert add.partition_keys == ["code", "issues", "sample"]
    assert [(run.partition_key, run.tags["jarvis/reason"]) for run in result.run_requests] == [
        ("code", "new source"), ("issues", "new source"), ("sample", "new source")]
    apply(result, instance)
    again = tick(source_partitions_sensor, config, instance, result.cursor)
    assert again.run_requests == [] and again.dynamic_partitions_requests == []


def test_the_first_run_is_not_requested_twice(config, instance):
    """The vault sensor meeting a new, unpublished vault leaves it to its registration run;
    the vault's next change requests a run of its own."""
    registration = tick(source_partitions_sensor, config, instance)
    apply(registration, instance)
    [first_run] = registration.run_requests
    record_run(instance, first_run)
    first_look = tick(vault_changes_sensor, config, instance)
    assert first_look.run_requests == []
    with (config.sources["sample"].path / NOTE).open("a") as handle:
        handle.write("\nOne more line.\n")
    [run] = tick(vault_changes_sensor, config, instance, first_look.cursor).run_requests
    assert run.tags["jarvis/reason"] == "nothing published yet"


def test_an_unpublished_vault_without_a_first_run_requests_one(config, instance):
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    result = tick(vault_changes_sensor, config, instance)
    [run] = result.run_requests
    assert run.partition_key == "sample" and run.tags["jarvis/reason"] == "nothing published yet"
    assert run.run_key == json.loads(result.cursor)["digests"]["sample"]
    assert tick(vault_changes_sensor, config, instance, result.cursor).run_requests == []


def test_removed_source_is_purged_then_its_partition_deleted(config, instance, tmp_path):
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    without = write_config(tmp_path / "project", {})
    purge = tick(source_partitions_sensor, without, instance)
    [run] = purge.run_requests
    assert run.partition_key == "sample" and run.run_key.startswith("purge-sample")
    assert run.tags["jarvis/reason"] == "source no longer configured"
    assert purge.dynamic_partitions_requests == []
    removal = tick(source_partitions_sensor, without, instance, purge.cursor)
    assert removal.run_requests == []
    [delete] = removal.dynamic_partitions_requests
    assert isinstance(delete, dg.DeleteDynamicPartitionsRequest)
    assert delete.partition_keys == ["sample"]
    apply(removal, instance)
    assert instance.get_dynamic_partitions(source_partitions.name) == []
    assert tick(source_partitions_sensor, without, instance, removal.cursor).run_requests == []
    assert tick(vault_changes_sensor, without, instance).run_requests == []


def test_partition_stays_while_its_purge_runs(config, instance, tmp_path):
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    without = write_config(tmp_path / "project", {})
    purge = tick(source_partitions_sensor, without, instance)
    run = record_run(instance, purge.run_requests[0], dg.DagsterRunStatus.STARTED)
    waiting = tick(source_partitions_sensor, without, instance, purge.cursor)
    assert waiting.run_requests == [] and waiting.dynamic_partitions_requests == []
    instance.report_run_canceled(run)
    [delete] = tick(source_partitions_sensor, without, instance,
                    waiting.cursor).dynamic_partitions_requests
    assert delete.partition_keys == ["sample"]


def test_a_source_removed_again_is_purged_again(config, instance, tmp_path):
    """Even by a sensor whose cursor was reset: the run key counts the purge runs made."""
    without = write_config(tmp_path / "without", {})
    purge_keys = []
    for _ in range(2):
        apply(tick(source_partitions_sensor, config, instance), instance)
        purge = tick(source_partitions_sensor, without, instance)
        [run] = purge.run_requests
        record_run(instance, run, dg.DagsterRunStatus.SUCCESS)
        purge_keys.append(run.run_key)
        apply(tick(source_partitions_sensor, without, instance, purge.cursor), instance)
    assert purge_keys == ["purge-sample-1", "purge-sample-2"]


def test_a_source_configured_again_during_its_purge_is_read_again(config, instance, tmp_path):
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    purge = tick(source_partitions_sensor, write_config(tmp_path / "without", {}), instance)
    back = tick(source_partitions_sensor, config, instance, purge.cursor)
    [run] = back.run_requests
    assert run.partition_key == "sample" and run.tags["jarvis/reason"] == "source configured again"
    assert back.dynamic_partitions_requests == []
    assert tick(source_partitions_sensor, config, instance, back.cursor).run_requests == []


def test_added_vault_is_registered(published, instance, tmp_path):
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    cursor = tick(source_partitions_sensor, published, instance).cursor
    second = tmp_path / "second"
    second.mkdir()
    (second / "Hello.md").write_text("# Hello\n")
    both = write_config(tmp_path / "project", {"sample": published.sources["sample"].path,
                                               "second": second})
    result = tick(source_partitions_sensor, both, instance, cursor)
    [add] = result.dynamic_partitions_requests
    assert add.partition_keys == ["second"]
    assert [run.partition_key for run in result.run_requests] == ["second"]


# --- vault changes -------------------------------------------------------------------------

def test_nothing_changed_requests_no_run(published, instance):
    cursor = settled(published, instance)
    again = tick(vault_changes_sensor, published, instance, cursor)
    assert again.run_requests == [] and again.cursor == cursor


def test_touched_file_requests_no_run(published, instance):
    cursor = settled(published, instance)
    path = published.sources["sample"].path / NOTE
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    result = tick(vault_changes_sensor, published, instance, cursor)
    assert result.run_requests == [] and result.cursor != cursor


def _add(vault):
    (vault / "Inbox" / "Fresh idea.md").write_text("# Fresh idea\n\nSomething new.\n")


def _edit(vault):
    with (vault / NOTE).open("a") as handle:
        handle.write("\nOne more line.\n")


def _delete(vault):
    (vault / NOTE).unlink()


def _rename(vault):
    (vault / NOTE).rename(vault / "Inbox" / "Captured.md")


@pytest.mark.parametrize("change, counts, paths", [
    (_add, (1, 0, 0, 0), "Inbox/Fresh idea.md"),
    (_edit, (0, 1, 0, 0), NOTE),
    (_delete, (0, 0, 1, 0), NOTE),
    (_rename, (0, 0, 0, 1), f"{NOTE} -> Inbox/Captured.md"),
], ids=["add", "edit", "delete", "rename"])
def test_each_change_requests_one_run_with_its_tags(published, instance, change, counts, paths):
    cursor = settled(published, instance)
    change(published.sources["sample"].path)
    result = tick(vault_changes_sensor, published, instance, cursor)
    [run] = result.run_requests
    assert run.partition_key == "sample" and run.run_key == json.loads(result.cursor)[
        "digests"]["sample"]
    assert run.tags["jarvis/reason"] == "vault changed"
    assert tuple(int(run.tags[f"jarvis/{kind}"]) for kind in
                 ("added", "changed", "deleted", "renamed")) == counts
    assert run.tags["jarvis/changed_paths"] == paths
    assert tick(vault_changes_sensor, published, instance, result.cursor).run_requests == []


def test_attachments_count_only_when_added_or_removed(published, instance):
    cursor = settled(published, instance)
    attachments = published.sources["sample"].path / "Attachments"
    with (attachments / "sensor-calibration.csv").open("a") as handle:
        handle.write("9,9\n")
    edited = tick(vault_changes_sensor, published, instance, cursor)
    assert edited.run_requests == []
    (attachments / "wiring.png").write_bytes(b"\x89PNG")
    [run] = tick(vault_changes_sensor, published, instance, edited.cursor).run_requests
    assert run.tags["jarvis/attachments_added"] == "1"


def test_cursor_survives_a_restart(published, instance):
    cursor = settled(published, instance)
    _edit(published.sources["sample"].path)
    before = tick(vault_changes_sensor, published, instance, cursor)
    with dg.DagsterInstance.ephemeral() as restarted:
        restarted.add_dynamic_partitions(source_partitions.name, ["sample"])
        after = tick(vault_changes_sensor, published, restarted, cursor)
        assert [r.run_key for r in after.run_requests] == [r.run_key for r in before.run_requests]
        assert after.cursor == before.cursor
        assert tick(vault_changes_sensor, published, restarted, after.cursor).run_requests == []


def test_an_unreadable_cursor_counts_as_none(published, instance):
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    result = tick(vault_changes_sensor, published, instance, "not json")
    assert result.run_requests == [] and "sample" in json.loads(result.cursor)["digests"]


def test_an_unreadable_vault_does_not_stop_the_others(published, instance, tmp_path, capfd):
    cursor = settled(published, instance)
    both = write_config(tmp_path / "project", {"sample": published.sources["sample"].path,
                                               "second": tmp_path / "unmounted"})
    instance.add_dynamic_partitions(source_partitions.name, ["second"])
    _edit(published.sources["sample"].path)
    result = tick(vault_changes_sensor, both, instance, cursor)
    assert [run.partition_key for run in result.run_requests] == ["sample"]
    assert "second" not in json.loads(result.cursor)["digests"]
    assert "vault 'second' not checked for changes" in capfd.readouterr().err


def test_unregistered_vaults_are_left_to_the_partitions_sensor(published, instance):
    assert tick(vault_changes_sensor, published, instance).run_requests == []
