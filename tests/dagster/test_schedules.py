"""Schedules: a nightly ingestion per source (one schedule per kind with configured sources,
each requesting its kind's ingest job) and a daily analytics snapshot per source, when and
where the configuration says."""

from datetime import datetime

import dagster as dg
import pytest

from jarvis_assets.partitions import kind_partitions, source_partitions
from jarvis_assets.sources import ingest_job
from jarvis_core.config import ConfigError
from jarvis_core.sources import registry
from schedules import build_schedules
from tests.dagster.sensor_helpers import write_config


@pytest.fixture(scope="module")
def persistent_instance():
    """Schedule contexts need an instance they can reopen by reference (not an ephemeral one);
    one per module, since creating its storage is the slow part."""
    with dg.instance_for_test() as instance:
        yield instance


@pytest.fixture
def instance(persistent_instance):
    """The module's instance with no source registered (in any partition set)."""
    for name in [source_partitions.name, *(kind.partitions for kind in registry.kinds())]:
        for source in persistent_instance.get_dynamic_partitions(name):
            persistent_instance.delete_dynamic_partition(name, source)
    return persistent_instance


INGEST_JOBS = {kind.name: ingest_job(kind) for kind in registry.kinds()}


def by_name(config) -> dict[str, dg.ScheduleDefinition]:
    return {schedule.name: schedule for schedule in build_schedules(config, INGEST_JOBS)}


def with_sources(tmp_path, **settings):
    """A configuration with one vault and one ticket set (their folders need not hold
    anything: schedules never read them)."""
    return write_config(tmp_path, {"notes": tmp_path / "notes"},
                        tickets={"jira": str(tmp_path / "jira")}, **settings)


def evaluate(schedule, instance, tick: datetime) -> list[dg.RunRequest]:
    """One tick; the context is closed after it, since it enters an instance of its own
    that would otherwise linger as Dagster's current one."""
    with dg.build_schedule_context(instance=instance, scheduled_execution_time=tick) as context:
        return list(schedule(context))


def test_defaults_run_every_source_nightly_and_snapshot_daily(tmp_path):
    schedules = by_name(with_sources(tmp_path))
    for kind in ("vault", "tickets"):  # one per kind with sources: its ingest job
        assert schedules[f"nightly_refresh_{kind}"].cron_schedule == "0 3 * * *"
        assert schedules[f"nightly_refresh_{kind}"].job_name == f"ingest_{kind}"
    assert schedules["daily_analytics"].cron_schedule == "30 6 * * *"
    assert schedules["daily_analytics"].job_name == "analytics_snapshot"
    assert {s.execution_timezone for s in schedules.values()} == {"UTC"}
    assert {s.default_status for s in schedules.values()} == {dg.DefaultScheduleStatus.RUNNING}
    assert all(s.description for s in schedules.values())


def test_only_kinds_with_configured_sources_get_a_nightly_schedule(tmp_path):
    assert {name for name in by_name(with_sources(tmp_path))
            if name.startswith("nightly_refresh")} == {"nightly_refresh_vault",
                                                       "nightly_refresh_tickets"}
    assert not [name for name in by_name(write_config(tmp_path / "none", {}))
                if name.startswith("nightly_refresh")]


def test_cron_and_timezone_come_from_the_configuration(tmp_path):
    config = with_sources(tmp_path, schedules={
        "refresh": {"cron": "15 1 * * 1-5", "timezone": "Europe/Berlin"},
        "analytics": {"cron": "0 */6 * * *"}})
    schedules = by_name(config)
    for kind in ("vault", "tickets"):
        assert schedules[f"nightly_refresh_{kind}"].cron_schedule == "15 1 * * 1-5"
        assert schedules[f"nightly_refresh_{kind}"].execution_timezone == "Europe/Berlin"
    assert schedules["daily_analytics"].cron_schedule == "0 */6 * * *"


@pytest.mark.parametrize("name, partitions", [
    ("nightly_refresh_vault", kind_partitions(registry.kind("vault")).name),
    ("daily_analytics", source_partitions.name)])
def test_a_tick_requests_one_idempotent_run_per_registered_source(tmp_path, instance, name,
                                                                  partitions):
    schedule = by_name(with_sources(tmp_path))[name]
    instance.add_dynamic_partitions(partitions, ["notes", "work"])
    tick = datetime(2026, 11, 22, 3, 0)
    requests, again = evaluate(schedule, instance, tick), evaluate(schedule, instance, tick)
    assert sorted(r.partition_key for r in requests) == ["notes", "work"]
    assert [r.run_key for r in requests] == [r.run_key for r in again]
    assert len({r.run_key for r in requests}) == 2
    assert all(r.tags["jarvis/reason"] == f"schedule {name}" for r in requests)


def test_no_sources_no_runs(tmp_path, instance):
    schedule = by_name(with_sources(tmp_path))["nightly_refresh_vault"]
    assert not evaluate(schedule, instance, datetime(2026, 11, 22, 3))


def test_a_nightly_ingestion_requests_only_the_sources_of_its_kind(tmp_path, instance):
    """A kind's ingest job runs its raw asset, partitioned by that kind's sources only."""
    schedules = by_name(with_sources(tmp_path))
    instance.add_dynamic_partitions(source_partitions.name, ["notes", "jira"])
    instance.add_dynamic_partitions(kind_partitions(registry.kind("vault")).name, ["notes"])
    instance.add_dynamic_partitions(kind_partitions(registry.kind("tickets")).name, ["jira"])
    tick = datetime(2026, 11, 22, 3)
    assert [r.partition_key for r in evaluate(schedules["nightly_refresh_vault"], instance,
                                              tick)] == ["notes"]
    assert [r.partition_key for r in evaluate(schedules["nightly_refresh_tickets"], instance,
                                              tick)] == ["jira"]


def test_invalid_cron_is_a_configuration_error_naming_the_field(tmp_path):
    config = write_config(tmp_path, {}, schedules={"analytics": {"cron": "61 3 * * *"}})
    with pytest.raises(ConfigError, match=r"jarvis.yaml: schedules.analytics.cron: "
                                          r"'61 3 \* \* \*' is not a valid cron expression"):
        build_schedules(config, INGEST_JOBS)


def test_unknown_timezone_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigError, match=r"schedules.refresh.timezone: .*unknown timezone "
                                          r"'Mars/Olympus'"):
        write_config(tmp_path, {}, schedules={"refresh": {"cron": "0 3 * * *",
                                                          "timezone": "Mars/Olympus"}})
