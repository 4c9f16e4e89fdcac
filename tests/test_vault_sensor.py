"""The vault change sensor: a run only for real note changes, one per change, with tags that
say what changed; partitions follow the configuration."""

import json
import os
import shutil

import dagster as dg
import pytest

from jarvis_assets.partitions import source_partitions
from jarvis_cli.refresh import run_refresh
from jarvis_resources import build_resources
from sensors import vault_changes
from sensors.vault_changes import truncated_list, vault_changes_sensor
from tests.conftest import SAMPLE_VAULT, write_config

NOTE = "Inbox/Quick Capture.md"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """One refresh of the sample vault, shared: each test copies its vault and serving data."""
    with pytest.MonkeyPatch.context() as env:
        for name in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
            env.delenv(name, raising=False)
        env.setenv("HF_HUB_OFFLINE", "1")
        vault = tmp_path_factory.mktemp("published") / "vault"
        shutil.copytree(SAMPLE_VAULT, vault, symlinks=True)
        config = write_config(vault.parent / "project", {"sample": vault})
        assert run_refresh(config)["ok"]
    return config


@pytest.fixture
def refreshed(tmp_path, published):
    """A private vault and data directory matching the published version (mtimes kept)."""
    vault = tmp_path / "vault"
    shutil.copytree(published.vaults["sample"].path, vault, symlinks=True)
    project = tmp_path / "project"
    shutil.copytree(published.data_dir / "serving", project / "data" / "serving")
    return write_config(project, {"sample": vault})


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def tick(config, instance, cursor=None) -> dg.SensorResult:
    context = dg.build_sensor_context(instance=instance, cursor=cursor,
                                      resources={"jarvis": build_resources(config)["jarvis"]})
    return vault_changes_sensor(context)


def apply(result: dg.SensorResult, instance: dg.DagsterInstance) -> None:
    """What the daemon does with a tick's partition requests."""
    for request in result.dynamic_partitions_requests:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)


def settled(config, instance) -> str:
    """The cursor of a sensor that has seen the published state: partition known, no run."""
    instance.add_dynamic_partitions(source_partitions.name, ["sample"])
    result = tick(config, instance)
    assert result.run_requests == []
    return result.cursor


def test_first_tick_registers_the_partition_and_requests_a_run(sample_config, instance):
    result = tick(sample_config, instance)
    [add] = result.dynamic_partitions_requests
    assert add.partition_keys == ["sample"]
    [run] = result.run_requests
    assert run.partition_key == "sample" and run.tags["jarvis/reason"] == "new source"
    apply(result, instance)
    assert tick(sample_config, instance, result.cursor).run_requests == []


def test_nothing_changed_requests_no_run(refreshed, instance):
    cursor = settled(refreshed, instance)
    again = tick(refreshed, instance, cursor)
    assert again.run_requests == [] and again.cursor == cursor


def test_touched_file_requests_no_run(refreshed, instance):
    cursor = settled(refreshed, instance)
    path = refreshed.vaults["sample"].path / NOTE
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    result = tick(refreshed, instance, cursor)
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
def test_each_change_requests_one_run_with_its_tags(refreshed, instance, change, counts, paths):
    cursor = settled(refreshed, instance)
    change(refreshed.vaults["sample"].path)
    result = tick(refreshed, instance, cursor)
    [run] = result.run_requests
    assert run.partition_key == "sample" and run.run_key == json.loads(result.cursor)[
        "digests"]["sample"]
    assert tuple(int(run.tags[f"jarvis/{kind}"]) for kind in
                 ("added", "changed", "deleted", "renamed")) == counts
    assert run.tags["jarvis/changed_paths"] == paths
    assert tick(refreshed, instance, result.cursor).run_requests == []


def test_attachments_count_only_when_added_or_removed(refreshed, instance):
    cursor = settled(refreshed, instance)
    attachments = refreshed.vaults["sample"].path / "Attachments"
    with (attachments / "sensor-calibration.csv").open("a") as handle:
        handle.write("9,9\n")
    edited = tick(refreshed, instance, cursor)
    assert edited.run_requests == []
    (attachments / "wiring.png").write_bytes(b"\x89PNG")
    [run] = tick(refreshed, instance, edited.cursor).run_requests
    assert run.tags["jarvis/attachments_added"] == "1"


def test_cursor_survives_a_restart(refreshed, instance):
    cursor = settled(refreshed, instance)
    _edit(refreshed.vaults["sample"].path)
    before = tick(refreshed, instance, cursor)
    with dg.DagsterInstance.ephemeral() as restarted:
        restarted.add_dynamic_partitions(source_partitions.name, ["sample"])
        after = tick(refreshed, restarted, cursor)
        assert [r.run_key for r in after.run_requests] == [r.run_key for r in before.run_requests]
        assert after.cursor == before.cursor
        assert tick(refreshed, restarted, after.cursor).run_requests == []


def test_removed_vault_is_purged_then_its_partition_deleted(refreshed, instance, tmp_path):
    cursor = settled(refreshed, instance)
    without = write_config(tmp_path / "project", {})
    purge = tick(without, instance, cursor)
    [run] = purge.run_requests
    assert run.partition_key == "sample" and run.run_key.startswith("purge-sample")
    assert purge.dynamic_partitions_requests == []
    removal = tick(without, instance, purge.cursor)
    assert removal.run_requests == []
    [delete] = removal.dynamic_partitions_requests
    assert isinstance(delete, dg.DeleteDynamicPartitionsRequest)
    assert delete.partition_keys == ["sample"]
    apply(removal, instance)
    assert instance.get_dynamic_partitions(source_partitions.name) == []
    assert tick(without, instance, removal.cursor).run_requests == []


def test_added_vault_is_registered(refreshed, instance, tmp_path):
    cursor = settled(refreshed, instance)
    second = tmp_path / "second"
    second.mkdir()
    (second / "Hello.md").write_text("# Hello\n")
    both = write_config(tmp_path / "project", {"sample": refreshed.vaults["sample"].path,
                                               "second": second})
    result = tick(both, instance, cursor)
    [add] = result.dynamic_partitions_requests
    assert add.partition_keys == ["second"]
    assert [run.partition_key for run in result.run_requests] == ["second"]


def test_an_unreadable_vault_does_not_stop_the_others(refreshed, instance, tmp_path,
                                                      monkeypatch):
    cursor = settled(refreshed, instance)
    second = tmp_path / "second"
    second.mkdir()
    both = write_config(tmp_path / "project", {"sample": refreshed.vaults["sample"].path,
                                               "second": second})
    instance.add_dynamic_partitions(source_partitions.name, ["second"])
    scan = vault_changes.scan_existing_vault

    def denied_for_second(root, exclude=()):
        if root == second:
            raise PermissionError(f"permission denied: {root}")
        return scan(root, exclude)

    monkeypatch.setattr(vault_changes, "scan_existing_vault", denied_for_second)
    _edit(refreshed.vaults["sample"].path)
    result = tick(both, instance, cursor)
    assert [run.partition_key for run in result.run_requests] == ["sample"]
    assert "second" not in json.loads(result.cursor)["digests"]


def test_changed_paths_tag_is_truncated():
    paths = [f"folder/note {i}.md" for i in range(500)]
    text = truncated_list(paths, 2_000)
    assert len(text) <= 2_000 and text.startswith("folder/note 0.md, ")
    assert text.endswith("more)")
