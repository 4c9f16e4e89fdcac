"""With ``instance.postgres_url`` the project instance is Dagster's stock PostgreSQL storage:
what a refresh, a sensor-requested run and a schedule tick's run record there, a stock
``DagsterInstance`` on the same database (not Jarvis's) reads back. The server is a
throwaway one (tests/postgres_server.py); without PostgreSQL binaries these tests are
skipped, saying why."""

from contextlib import contextmanager
from datetime import datetime

import dagster as dg
import pytest
import yaml

from jarvis_core.config import ConfigError
from jarvis_definitions import build_definitions
from jarvis_pipeline.instance import dagster_home, project_instance
from jarvis_pipeline.refresh import run_refresh
from tests.dagster.sensor_helpers import CHANGE_SENSORS, NOTE, make_vault, tick
from tests.dagster.test_refresh_instance import (
    assert_a_daemon_runs_nothing_again,
    dagsters_own_instance,
)
from tests.pipeline_helpers import name_a_storage, write_config
from tests.postgres_server import new_database


@pytest.fixture(scope="module")
def refreshed(tmp_path_factory, postgres_server):
    """A one-vault project refreshed once with its instance in a database of its own: the
    configuration and the refresh's report."""
    root = tmp_path_factory.mktemp("postgres-project")
    config = write_config(root / "project", {"notes": make_vault(root / "vault")},
                          instance={"postgres_url": new_database(postgres_server)})
    report = run_refresh(config)
    assert report["ok"], report
    return config, report


@contextmanager
def stock_instance(config, folder):
    """Dagster's own instance on the project's database, from a dagster.yaml of its own."""
    folder.mkdir()
    (folder / "dagster.yaml").write_text(yaml.safe_dump(
        {"storage": {"postgres": {"postgres_url": config.instance.postgres_url}}}))
    with dg.DagsterInstance.from_config(str(folder)) as instance:
        yield instance


def run_request(config, instance, job_name: str, request: dg.RunRequest, **tags):
    """What the daemon launches for ``request``, in this process."""
    job = build_definitions(config).resolve_job_def(job_name)
    result = job.execute_in_process(instance=instance, partition_key=request.partition_key,
                                    tags={**request.tags, **tags})
    assert result.success
    return result.run_id


def test_a_refresh_is_recorded_in_postgresql(refreshed, tmp_path):
    config, report = refreshed
    assert not (dagster_home(config) / "history").exists()  # no SQLite run storage
    with stock_instance(config, tmp_path / "stock") as stock:
        assert_a_daemon_runs_nothing_again(config, stock, report["sources"][0]["run_id"])


def test_the_home_names_postgresql_for_dagsters_own_processes(tmp_path, postgres_server,
                                                              monkeypatch):
    """`jarvis ui` and `jarvis daemon` run Dagster on this home: its settings name the
    PostgreSQL storage, in place of one they named before, readable by the owner only."""
    url = new_database(postgres_server)
    config = write_config(tmp_path / "project", {}, instance={"postgres_url": url})
    name_a_storage(config, tmp_path / "elsewhere")
    home = dagster_home(config)
    with dagsters_own_instance(home, monkeypatch) as own:
        assert [type(storage).__name__ for storage in (
            own.run_storage, own.event_log_storage, own.schedule_storage)] == [
            "PostgresRunStorage", "PostgresEventLogStorage", "PostgresScheduleStorage"]
    assert (home / "dagster.yaml").stat().st_mode & 0o777 == 0o600


def test_a_sensor_requested_run_is_recorded_in_postgresql(refreshed, tmp_path):
    config, _ = refreshed
    vault = config.sources_of("vault")["notes"].path
    (vault / NOTE).write_text((vault / NOTE).read_text() + "\nAnd a spare battery.\n")
    sensor = CHANGE_SENSORS["vault"]
    with project_instance(config) as instance:
        [request] = tick(sensor, config, instance).run_requests
        run_id = run_request(config, instance, sensor.job_name, request)
    with stock_instance(config, tmp_path / "stock") as stock:
        run = stock.get_run_by_id(run_id)
        assert (run.job_name, run.status, run.tags["dagster/partition"]) == (
            sensor.job_name, dg.DagsterRunStatus.SUCCESS, "notes")
        [latest] = stock.fetch_materializations(dg.AssetKey("raw_notes"), limit=1).records
        assert latest.run_id == run_id


def test_a_schedule_ticks_run_is_recorded_in_postgresql(refreshed, tmp_path):
    """The nightly schedule evaluated on the instance (which must be a persistent one for
    a schedule context), its run tagged as the daemon tags a scheduled run."""
    config, _ = refreshed
    schedule = build_definitions(config).get_schedule_def("nightly_refresh_vault")
    with project_instance(config) as instance, dg.build_schedule_context(
            instance=instance, scheduled_execution_time=datetime(2026, 11, 22, 3)) as context:
        [request] = schedule(context)
        run_id = run_request(config, instance, schedule.job_name, request,
                             **{"dagster/schedule_name": schedule.name})
    with stock_instance(config, tmp_path / "stock") as stock:
        [run] = stock.get_runs(filters=dg.RunsFilter(
            tags={"dagster/schedule_name": schedule.name}))
        assert (run.run_id, run.status, run.tags["jarvis/reason"]) == (
            run_id, dg.DagsterRunStatus.SUCCESS, f"schedule {schedule.name}")


def test_an_unreachable_server_is_an_error_naming_the_setting(tmp_path, postgres_server):
    url = postgres_server.replace("/postgres?", "/no_such_database?")
    config = write_config(tmp_path / "project", {}, instance={"postgres_url": url})
    with pytest.raises(ConfigError, match=r"instance\.postgres_url: cannot reach .*no_such"):
        dagster_home(config)


def test_a_malformed_url_is_an_error_naming_the_setting(tmp_path):
    with pytest.raises(ConfigError, match=r"instance\.postgres_url.*not a PostgreSQL URL"):
        write_config(tmp_path / "project", {}, instance={"postgres_url": "mysql://x/db"})
    with pytest.raises(ConfigError, match=r"instance\.postgres_url.*names no database"):
        write_config(tmp_path / "project", {}, instance={"postgres_url": "postgresql://x"})


def test_a_url_without_a_driver_gets_the_one_dagster_postgres_installs(tmp_path):
    config = write_config(tmp_path / "project", {},
                          instance={"postgres_url": "postgres://dana@db:5432/jarvis"})
    assert config.instance.postgres_url == "postgresql+psycopg2://dana@db:5432/jarvis"
