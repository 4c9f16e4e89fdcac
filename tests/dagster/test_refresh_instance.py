"""`jarvis refresh` records its runs and partitions in the instance `jarvis ui` and `jarvis
daemon` use, so a daemon started after a refresh sees every source as known and current."""

import dagster as dg

from jarvis_assets.partitions import source_partitions
from jarvis_pipeline.instance import dagster_home
from sensors.source_partitions import source_partitions_sensor
from sensors.vault_changes import vault_changes_sensor
from tests.dagster.sensor_helpers import tick


def test_a_daemon_after_a_refresh_runs_nothing_again(published_sample):
    home = dagster_home(published_sample)
    assert home == published_sample.data_dir / "dagster"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_runs(filters=dg.RunsFilter(
            tags={"dagster/partition": "sample"}))  # the refresh's runs are in it
        assert instance.get_dynamic_partitions(source_partitions.name) == ["sample"]
        for sensor in (source_partitions_sensor, vault_changes_sensor):  # no cursor yet
            assert not tick(sensor, published_sample, instance, None).run_requests
