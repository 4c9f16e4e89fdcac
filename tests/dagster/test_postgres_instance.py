"""With ``instance.postgres_url`` the project instance is Dagster's stock PostgreSQL storage:
what a refresh and a sensor-requested run record there, a stock ``DagsterInstance`` on the
same database (not Jarvis's) reads back. The server is a throwaway one
(tests/postgres_server.py); without PostgreSQL binaries these tests are skipped."""

from contextlib import contextmanager

import dagster as dg
import pytest
import yaml

from jarvis_core.config import ConfigError
from jarvis_definitions import build_definitions
from jarvis_pipeline.instance import dagster_home, project_instance
from jarvis_pipeline.refresh import run_refresh
from tests.dagster.sensor_helpers import CHANGE_SENSORS, NOTE, make_vault, tick
from tests.dagster.test_refresh_instance import assert_a_daemon_runs_nothing_again
from tests.pipeline_helpers import write_config


@contextmanager
def stock_instance(postgres_url: str, folder):
    """Dagster's own instance on the database, from a dagster.yaml of its own."""
    folder.mkdir()
    (folder / "dagster.yaml").write_text(yaml.safe_dump(
        {"storage": {"postgres": {"postgres_url": postgres_url}}}))
    with dg.DagsterInstance.from_config(str(folder)) as instance:
        yield instance


def test_a_refresh_and_a_sensor_requested_run_are_recorded_in_postgresql(tmp_path,
                                                                         postgres_url):
    vault = make_vault(tmp_path / "vault")
    config = write_config(tmp_path / "project", {"notes": vault},
                          instance={"postgres_url": postgres_url})
    report = run_refresh(config)
    assert report["ok"], report
    assert not (dagster_home(config) / "history").exists()  # no SQLite run storage
    with stock_instance(postgres_url, tmp_path / "stock") as stock:
        assert_a_daemon_runs_nothing_again(config, stock, report["sources"][0]["run_id"])

    (vault / NOTE).write_text((vault / NOTE).read_text() + "\nAnd a spare battery.\n")
    with project_instance(config) as instance:
        sensor = CHANGE_SENSORS["vault"]
        [request] = tick(sensor, config, instance).run_requests
        job = build_definitions(config).resolve_job_def(sensor.job_name)
        result = job.execute_in_process(instance=instance, partition_key=request.partition_key,
                                        tags=request.tags)
        assert result.success
    with stock_instance(postgres_url, tmp_path / "second") as stock:
        run = stock.get_run_by_id(result.run_id)
        assert (run.job_name, run.status, run.tags["dagster/partition"]) == (
            sensor.job_name, dg.DagsterRunStatus.SUCCESS, "notes")
        [latest] = stock.fetch_materializations(dg.AssetKey("raw_notes"), limit=1).records
        assert latest.run_id == result.run_id


def test_an_unreachable_server_is_an_error_naming_the_setting(tmp_path, postgres_server):
    url = postgres_server.replace("/postgres?", "/no_such_database?")
    config = write_config(tmp_path / "project", {}, instance={"postgres_url": url})
    with pytest.raises(ConfigError, match=r"instance\.postgres_url: cannot reach .*no_such"):
        dagster_home(config)


def test_a_malformed_url_is_an_error_naming_the_setting(tmp_path):
    with pytest.raises(ConfigError, match=r"instance\.postgres_url.*not a PostgreSQL URL"):
        write_config(tmp_path / "project", {}, instance={"postgres_url": "mysql://x/db"})
