"""The change sensors against a serving version a real refresh published: a daemon with no
cursor requests nothing for sources already published, and a touched but identical file
requests nothing (what the sensor tests' hand-published versions stand for, checked once)."""

import os

import dagster as dg
import pytest

from jarvis_pipeline.refresh import run_refresh
from tests.dagster.sensor_helpers import (
    CHANGE_SENSORS,
    NOTE,
    make_export,
    make_repo,
    make_vault,
    register,
    tick,
    write_config,
)

vault_changes_sensor = CHANGE_SENSORS["vault"]
repo_changes_sensor = CHANGE_SENSORS["repo"]
ticket_exports_sensor = CHANGE_SENSORS["tickets"]


@pytest.mark.slow
def test_after_a_refresh_an_empty_cursor_compares_with_the_published_version(tmp_path):
    vault = make_vault(tmp_path / "vault")
    exports = make_export(tmp_path / "issues")
    config = write_config(tmp_path / "project", {"notes": vault},
                          repos={"code": str(make_repo(tmp_path / "code"))},
                          tickets={"issues": {"path": str(exports), "repo": "acme/lumen"}})
    assert run_refresh(config)["ok"]
    with dg.DagsterInstance.ephemeral() as instance:
        for kind, source in (("repo", "code"), ("tickets", "issues"), ("vault", "notes")):
            register(instance, kind, source)
        for sensor in (vault_changes_sensor, repo_changes_sensor, ticket_exports_sensor):
            assert not tick(sensor, config, instance).run_requests, sensor.name

        notes = tick(vault_changes_sensor, config, instance)
        issues = exports / "issues.json"
        for path in (vault / NOTE, issues):
            path.write_bytes(path.read_bytes())
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
        assert not tick(vault_changes_sensor, config, instance, notes.cursor).run_requests
        assert not tick(ticket_exports_sensor, config, instance).run_requests

        issues.write_text(issues.read_text().replace("\"title\": \"", "\"title\": \"Edited: ", 1))
        [request] = tick(ticket_exports_sensor, config, instance).run_requests
        assert request.tags["jarvis/changed_paths"] == "issues.json"
