"""The real daemon (`jarvis daemon`) on a project whose instance is on PostgreSQL: the ticks
it writes there, a sensor's and a schedule's, a stock ``DagsterInstance`` on the same
database (not Jarvis's) reads back. The run queue is paused (``concurrency: runs:
max_concurrent_runs: 0``), so the runs the ticks request are recorded, queued, and none is
launched.

A schedule ticks at its cron time only; instead of waiting for one, the daemon is stopped
and its schedule's stored start is moved back a day, as if it had been down since then:
started again, it catches up the missed tick at once. That stored start is Dagster's
private ``ScheduleInstigatorData``; the test fails loudly if it changes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.scheduler.instigation import ScheduleInstigatorData, TickStatus

from jarvis_pipeline.instance import dagster_home
from tests.dagster.sensor_helpers import make_vault
from tests.dagster.test_postgres_instance import stock_instance
from tests.pipeline_helpers import PROJECT_ROOT, write_config
from tests.postgres_server import new_database

JARVIS = Path(sys.executable).parent / "jarvis"
TICK_SECONDS = 60  # a daemon's start (its code server loads the definitions) and first ticks
NIGHTLY_HOUR = 3  # schedules.refresh: 03:00 UTC


@pytest.fixture
def project(tmp_path, postgres_server):
    """A one-vault project, never refreshed, its instance in a database of its own and its
    run queue paused."""
    config = write_config(tmp_path / "project", {"notes": make_vault(tmp_path / "vault")},
                          instance={"postgres_url": new_database(postgres_server)},
                          schedules={"refresh": {"cron": f"0 {NIGHTLY_HOUR} * * *"}})
    settings_file = dagster_home(config) / "dagster.yaml"
    settings = yaml.safe_load(settings_file.read_text())
    settings.setdefault("concurrency", {})["runs"] = {"max_concurrent_runs": 0}
    settings_file.write_text(yaml.safe_dump(settings))
    return config


@contextmanager
def running_daemon(config, log_path):
    """`jarvis daemon` on ``config`` from the project folder (its workspace.yaml), in a
    process group of its own (the daemon and its code server), ended on leaving."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    env.pop("DAGSTER_HOME", None)
    command = [str(JARVIS), "--config", str(config.config_path), "daemon"]
    with open(log_path, "a") as log:
        daemon = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield daemon
    finally:
        for sent in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(daemon.pid, sent)
                daemon.wait(timeout=15)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue


def state_of(instance: dg.DagsterInstance, name: str):
    """The stored state of the sensor or schedule ``name``, or None."""
    found = [state for state in instance.all_instigator_state() if state.instigator_name == name]
    return found[0] if found else None


def finished_tick(instance: dg.DagsterInstance, name: str, daemon, log_path):
    """The latest tick of ``name`` once it finished, waiting for the daemon to write it."""
    deadline = time.monotonic() + TICK_SECONDS
    while time.monotonic() < deadline:
        assert daemon.poll() is None, f"the daemon exited: {log_path.read_text()[-2000:]}"
        state = state_of(instance, name)
        ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id,
                                   limit=1) if state else []
        if ticks and ticks[0].status != TickStatus.STARTED:
            return ticks[0]
        time.sleep(0.5)
    raise AssertionError(f"no finished tick of {name} within {TICK_SECONDS} s; the daemon's "
                         f"log ends: {log_path.read_text()[-2000:]}")


def latest_nightly_time() -> datetime:
    """The latest NIGHTLY_HOUR:00 UTC before now."""
    now = datetime.now(UTC)
    today = now.replace(hour=NIGHTLY_HOUR, minute=0, second=0, microsecond=0)
    return today if today <= now else today - timedelta(days=1)


@pytest.mark.slow
def test_the_daemons_ticks_are_recorded_in_postgresql(project, tmp_path):
    """A sensor's tick (the first ingestion of the new source) from a first start; the
    nightly schedule's latest tick, missed while the daemon was down, from a second."""
    log_path = tmp_path / "daemon.log"
    with stock_instance(project, tmp_path / "stock") as stock:
        with running_daemon(project, log_path) as daemon:
            sensor_tick = finished_tick(stock, "source_partitions_sensor", daemon, log_path)
        [run_id] = sensor_tick.run_ids
        run = stock.get_run_by_id(run_id)
        assert (sensor_tick.status, run.status, run.tags["dagster/partition"]) == (
            TickStatus.SUCCESS, dg.DagsterRunStatus.QUEUED, "notes")

        schedule = state_of(stock, "nightly_refresh_vault")  # stored by the daemon's scheduler
        a_day_ago = (datetime.now(UTC) - timedelta(days=1)).timestamp()
        stock.update_instigator_state(schedule.with_data(ScheduleInstigatorData(
            schedule.instigator_data.cron_schedule, start_timestamp=a_day_ago)))
        with running_daemon(project, log_path) as daemon:
            schedule_tick = finished_tick(stock, "nightly_refresh_vault", daemon, log_path)
        [run_id] = schedule_tick.run_ids
        run = stock.get_run_by_id(run_id)
        assert (schedule_tick.status, schedule_tick.timestamp) == (
            TickStatus.SUCCESS, latest_nightly_time().timestamp())
        assert (run.status, run.tags["dagster/schedule_name"], run.tags["dagster/partition"]) == (
            dg.DagsterRunStatus.QUEUED, "nightly_refresh_vault", "notes")
