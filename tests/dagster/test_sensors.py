"""The source partitions and vault change sensors: partitions follow the configuration (in
the layers after ingestion and in each kind's raw asset), a vault run only for real note
changes, one per change, with tags that say what changed."""

import json
import os

import dagster as dg
import pytest

from jarvis_assets.partitions import kind_partitions, source_partitions
from jarvis_core.sources import registry
from jarvis_definitions import build_definitions
from tests.dagster.sensor_helpers import (
    CHANGE_SENSORS,
    NOTE,
    PARTITIONS_SENSOR,
    apply,
    make_export,
    make_repo,
    make_vault,
    publish,
    record_run,
    register,
    tick,
    write_config,
)

SENSORS = {"source_partitions_sensor": 30, "vault_changes_sensor": 30,
           "repo_changes_sensor": 60, "tickets_changes_sensor": 30,
           "mail_changes_sensor": 30, "confluence_changes_sensor": 30,
           "automation_condition_sensor": 30, "run_failure_notices": 30}
VAULT_SOURCES = kind_partitions(registry.kind("vault")).name
vault_changes_sensor = CHANGE_SENSORS["vault"]
source_partitions_sensor = PARTITIONS_SENSOR


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
    register(instance, "vault", "sample")
    result = tick(vault_changes_sensor, config, instance)
    assert result.run_requests == []
    return result.cursor


def test_every_sensor_is_in_the_definitions_described_and_running(config):
    loaded = {sensor.name: sensor for sensor in build_definitions(config).sensors}
    assert {name: sensor.minimum_interval_seconds for name, sensor in loaded.items()} == SENSORS
    assert all(sensor.description for sensor in loaded.values())
    assert {sensor.default_status for sensor in loaded.values()} == {
        dg.DefaultSensorStatus.RUNNING}


def test_every_kind_has_one_change_sensor_requesting_its_ingest_job(config):
    """A kind's change sensor is made from its descriptor: named after the kind, described
    by its configuration section, running the kind's ingest job (its raw asset alone)."""
    loaded = {sensor.name: sensor for sensor in build_definitions(config).sensors}
    for kind in registry.kinds():
        sensor = loaded[f"{kind.name}_changes_sensor"]
        assert sensor.job_name == kind.ingest_job == f"ingest_{kind.name}"
        assert f"'{kind.section}:'" in sensor.description
    assert {job.name for job in loaded["source_partitions_sensor"].jobs} == {
        kind.ingest_job for kind in registry.kinds()}


# --- source partitions ---------------------------------------------------------------------

def test_new_sources_of_every_kind_are_registered_with_a_first_run(tmp_path, vault, instance):
    config = write_config(tmp_path / "project", {"sample": vault},
                          repos={"code": str(make_repo(tmp_path / "code"))},
                          tickets={"issues": {"path": str(make_export(tmp_path / "issues"))}})
    result = tick(source_partitions_sensor, config, instance)
    # each source in its kind's partitions (its raw asset) and in every later layer's
    assert {(add.partitions_def_name, tuple(add.partition_keys))
            for add in result.dynamic_partitions_requests} == {
        ("vault_sources", ("sample",)), ("repo_sources", ("code",)),
        ("tickets_sources", ("issues",)), (source_partitions.name, ("code", "issues", "sample"))}
    assert all(isinstance(add, dg.AddDynamicPartitionsRequest)
               for add in result.dynamic_partitions_requests)
    # the first run of each is its kind's ingest job
    assert sorted((run.partition_key, run.tags["jarvis/reason"], run.job_name)
                  for run in result.run_requests) == [
        ("code", "new source", "ingest_repo"), ("issues", "new source", "ingest_tickets"),
        ("sample", "new source", "ingest_vault")]
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
    assert run.tags["jarvis/reason"] == "not published yet"


def test_an_unpublished_vault_without_a_first_run_requests_one(config, instance):
    register(instance, "vault", "sample")
    result = tick(vault_changes_sensor, config, instance)
    [run] = result.run_requests
    assert run.partition_key == "sample" and run.tags["jarvis/reason"] == "not published yet"
    assert run.run_key == json.loads(result.cursor)["sample"]
    assert tick(vault_changes_sensor, config, instance, result.cursor).run_requests == []


def deletes(result) -> set[tuple[str, tuple[str, ...]]]:
    assert all(isinstance(request, dg.DeleteDynamicPartitionsRequest)
               for request in result.dynamic_partitions_requests)
    return {(request.partitions_def_name, tuple(request.partition_keys))
            for request in result.dynamic_partitions_requests}


def test_removed_source_is_purged_then_its_partition_deleted(config, instance, tmp_path):
    register(instance, "vault", "sample")
    without = write_config(tmp_path / "project", {})
    purge = tick(source_partitions_sensor, without, instance)
    [run] = purge.run_requests
    assert run.partition_key == "sample" and run.run_key.startswith("purge-sample")
    assert run.tags["jarvis/reason"] == "source no longer configured"
    assert run.job_name == "ingest_vault"  # the raw asset that held it removes its rows
    assert purge.dynamic_partitions_requests == []
    removal = tick(source_partitions_sensor, without, instance, purge.cursor)
    assert removal.run_requests == []
    assert deletes(removal) == {(VAULT_SOURCES, ("sample",)),
                                (source_partitions.name, ("sample",))}
    apply(removal, instance)
    assert instance.get_dynamic_partitions(source_partitions.name) == []
    assert instance.get_dynamic_partitions(VAULT_SOURCES) == []
    assert tick(source_partitions_sensor, without, instance, removal.cursor).run_requests == []
    assert tick(vault_changes_sensor, without, instance).run_requests == []


def test_partition_stays_while_its_purge_runs(config, instance, tmp_path):
    register(instance, "vault", "sample")
    without = write_config(tmp_path / "project", {})
    purge = tick(source_partitions_sensor, without, instance)
    run = record_run(instance, purge.run_requests[0], dg.DagsterRunStatus.STARTED)
    waiting = tick(source_partitions_sensor, without, instance, purge.cursor)
    assert waiting.run_requests == [] and waiting.dynamic_partitions_requests == []
    instance.report_run_canceled(run)
    assert deletes(tick(source_partitions_sensor, without, instance, waiting.cursor)) == {
        (VAULT_SOURCES, ("sample",)), (source_partitions.name, ("sample",))}


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
    register(instance, "vault", "sample")
    purge = tick(source_partitions_sensor, write_config(tmp_path / "without", {}), instance)
    back = tick(source_partitions_sensor, config, instance, purge.cursor)
    [run] = back.run_requests
    assert run.partition_key == "sample" and run.tags["jarvis/reason"] == "source configured again"
    assert run.job_name == "ingest_vault"
    assert back.dynamic_partitions_requests == []
    assert tick(source_partitions_sensor, config, instance, back.cursor).run_requests == []


def test_added_vault_is_registered(published, instance, tmp_path):
    register(instance, "vault", "sample")
    cursor = tick(source_partitions_sensor, published, instance).cursor
    second = tmp_path / "second"
    second.mkdir()
    (second / "Hello.md").write_text("# Hello\n")
    both = write_config(tmp_path / "project", {"sample": published.sources["sample"].path,
                                               "second": second})
    result = tick(source_partitions_sensor, both, instance, cursor)
    assert {(add.partitions_def_name, tuple(add.partition_keys))
            for add in result.dynamic_partitions_requests} == {
        (VAULT_SOURCES, ("second",)), (source_partitions.name, ("second",))}
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


@pytest.mark.parametrize("change, counts, paths, reason", [
    (_add, (1, 0, 0, 0), "Inbox/Fresh idea.md", "notes 1 added"),
    (_edit, (0, 1, 0, 0), NOTE, "notes 1 changed"),
    (_delete, (0, 0, 1, 0), NOTE, "notes 1 deleted"),
    (_rename, (0, 0, 0, 1), f"{NOTE} -> Inbox/Captured.md", "notes 1 renamed"),
], ids=["add", "edit", "delete", "rename"])
def test_each_change_requests_one_run_with_its_tags(published, instance, change, counts, paths,
                                                    reason):
    cursor = settled(published, instance)
    change(published.sources["sample"].path)
    result = tick(vault_changes_sensor, published, instance, cursor)
    [run] = result.run_requests
    assert run.partition_key == "sample" and run.run_key == json.loads(result.cursor)["sample"]
    assert run.tags["jarvis/reason"] == reason
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
    assert run.tags["jarvis/reason"] == "notes attachments changed"


def test_cursor_survives_a_restart(published, instance):
    cursor = settled(published, instance)
    _edit(published.sources["sample"].path)
    before = tick(vault_changes_sensor, published, instance, cursor)
    with dg.DagsterInstance.ephemeral() as restarted:
        register(restarted, "vault", "sample")
        after = tick(vault_changes_sensor, published, restarted, cursor)
        assert [r.run_key for r in after.run_requests] == [r.run_key for r in before.run_requests]
        assert after.cursor == before.cursor
        assert tick(vault_changes_sensor, published, restarted, after.cursor).run_requests == []


def test_an_unreadable_cursor_counts_as_none(published, instance):
    register(instance, "vault", "sample")
    result = tick(vault_changes_sensor, published, instance, "not json")
    assert result.run_requests == [] and "sample" in json.loads(result.cursor)


def test_the_cursor_is_one_digest_per_source(published, instance):
    """The older vault sensor's cursor ({"digests": {...}}) holds no digest of a source: the
    vault is compared with the published version, and the cursor written is flat."""
    cursor = settled(published, instance)
    assert set(json.loads(cursor)) == {"sample"}
    older = json.dumps({"digests": json.loads(cursor)})
    result = tick(vault_changes_sensor, published, instance, older)
    assert result.run_requests == [] and result.cursor == cursor
    _edit(published.sources["sample"].path)
    [run] = tick(vault_changes_sensor, published, instance, older).run_requests
    assert run.tags["jarvis/reason"] == "notes 1 changed"


def test_an_unreadable_vault_does_not_stop_the_others(published, instance, tmp_path, capfd):
    cursor = settled(published, instance)
    both = write_config(tmp_path / "project", {"sample": published.sources["sample"].path,
                                               "second": tmp_path / "unmounted"})
    register(instance, "vault", "second")
    _edit(published.sources["sample"].path)
    result = tick(vault_changes_sensor, both, instance, cursor)
    assert [run.partition_key for run in result.run_requests] == ["sample"]
    assert "second" not in json.loads(result.cursor)
    assert "vault 'second' not checked for changes" in capfd.readouterr().err


def test_unregistered_vaults_are_left_to_the_partitions_sensor(published, instance):
    assert tick(vault_changes_sensor, published, instance).run_requests == []
    # a source registered only in the later layers' partitions has no raw partition yet
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    _edit(published.sources["sample"].path)
    assert tick(vault_changes_sensor, published, instance).run_requests == []
