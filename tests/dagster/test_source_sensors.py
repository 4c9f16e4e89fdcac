"""The repository and export sensors: a run when a head moved or an export's content changed,
and only then, with a cursor that survives restarts and falls back to the published
version."""

import json
import os
import shutil

import dagster as dg
import pytest

from tests.dagster.sensor_helpers import (
    CHANGE_SENSORS,
    PARTITIONS_SENSOR,
    apply,
    commit,
    git,
    make_export,
    make_repo,
    publish,
    record_run,
    register,
    tick,
    write_config,
)

repo_changes_sensor = CHANGE_SENSORS["repo"]
ticket_exports_sensor = CHANGE_SENSORS["tickets"]
source_partitions_sensor = PARTITIONS_SENSOR


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "code")


@pytest.fixture
def exports(tmp_path):
    return make_export(tmp_path / "issues")


@pytest.fixture
def tickets_config(tmp_path, exports):
    return write_config(tmp_path / "project", {},
                        tickets={"issues": {"path": str(exports), "repo": "acme/lumen"}})


def edit_issue(exports, field: str, text: str) -> None:
    issues = exports / "issues.json"
    data = json.loads(issues.read_text())
    data[0][field] = text
    issues.write_text(json.dumps(data))


# --- repositories --------------------------------------------------------------------------

def test_repo_head_moves_request_one_run_each(tmp_path, repo, instance):
    config = write_config(tmp_path / "project", {}, repos={"code": str(repo)})
    register(instance, "repo", "code")
    first = tick(repo_changes_sensor, config, instance)
    [request] = first.run_requests  # nothing published yet
    head = git(repo, "rev-parse", "HEAD")
    assert request.partition_key == "code" and request.tags["jarvis/head"] == head
    assert request.tags["jarvis/reason"] == "not published yet"
    assert "jarvis/previous_head" not in request.tags
    publish(config)  # what the requested run publishes: a move is compared with that head

    idle = tick(repo_changes_sensor, config, instance, first.cursor)
    assert not idle.run_requests and idle.cursor == first.cursor

    new_head = commit(repo, "app.py", "print('hi')\n")
    moved = tick(repo_changes_sensor, config, instance, idle.cursor)
    [request] = moved.run_requests
    assert request.run_key == f"code-{new_head}"
    assert request.tags["jarvis/previous_head"] == head
    assert request.tags["jarvis/reason"] == f"head moved to {new_head[:12]}"

    git(repo, "reset", "-q", "--hard", "HEAD~1")  # history rewritten: a force-push
    rewritten = commit(repo, "app.py", "print('hello')\n")
    [request] = tick(repo_changes_sensor, config, instance, moved.cursor).run_requests
    assert request.tags["jarvis/head"] == rewritten != new_head
    assert request.run_key == f"code-{rewritten}"


def test_repo_by_url_is_checked_without_cloning(tmp_path, repo, instance):
    bundle = tmp_path / "code.bundle"
    git(repo, "bundle", "create", "-q", str(bundle), "--all")
    config = write_config(tmp_path / "project", {}, repos={"code": {"url": str(bundle),
                                                                    "branch": "main"}})
    register(instance, "repo", "code")
    [request] = tick(repo_changes_sensor, config, instance).run_requests
    assert request.tags["jarvis/head"] == git(repo, "rev-parse", "HEAD")
    assert not (config.data_dir / "repos").exists()


def test_broken_repo_is_logged_and_the_others_still_checked(tmp_path, repo, instance, capfd):
    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    config = write_config(tmp_path / "project", {},
                          repos={"code": str(repo), "plain": str(not_a_repo)})
    register(instance, "repo", "code", "plain")
    result = tick(repo_changes_sensor, config, instance)
    assert [r.partition_key for r in result.run_requests] == ["code"]
    logged = capfd.readouterr().err
    assert "repository 'plain' not checked for changes" in logged
    assert "plain: not a git repository" in logged


def test_without_a_cursor_the_published_head_is_compared(tmp_path, repo, instance):
    config = write_config(tmp_path / "project", {}, repos={"code": str(repo)})
    publish(config)
    register(instance, "repo", "code")
    published = git(repo, "rev-parse", "HEAD")
    idle = tick(repo_changes_sensor, config, instance)
    assert not idle.run_requests
    assert json.loads(idle.cursor) == {"code": f"code-{published}"}  # one digest per source
    new_head = commit(repo, "app.py", "print('hi')\n")
    [request] = tick(repo_changes_sensor, config, instance).run_requests
    assert request.run_key == f"code-{new_head}"
    assert request.tags["jarvis/previous_head"] == published


def test_a_new_repository_gets_one_first_run(tmp_path, repo, instance):
    config = write_config(tmp_path / "project", {}, repos={"code": str(repo)})
    registration = tick(source_partitions_sensor, config, instance)
    apply(registration, instance)
    assert registration.run_requests[0].job_name == "ingest_repo"
    record_run(instance, registration.run_requests[0])
    first_look = tick(repo_changes_sensor, config, instance)
    assert not first_look.run_requests
    commit(repo, "app.py", "print('hi')\n")
    assert len(tick(repo_changes_sensor, config, instance, first_look.cursor).run_requests) == 1


def test_unregistered_sources_are_left_to_the_partitions_sensor(tmp_path, repo, exports,
                                                                instance):
    config = write_config(tmp_path / "project", {}, repos={"code": str(repo)},
                          tickets={"issues": {"path": str(exports), "repo": "acme/lumen"}})
    assert not tick(repo_changes_sensor, config, instance).run_requests
    assert not tick(ticket_exports_sensor, config, instance).run_requests
    # each sensor reads its own kind's partitions: the ticket set registered, the repository
    # still is not
    register(instance, "tickets", "issues")
    assert not tick(repo_changes_sensor, config, instance).run_requests
    assert [r.partition_key for r in tick(ticket_exports_sensor, config,
                                          instance).run_requests] == ["issues"]


# --- ticket exports ------------------------------------------------------------------------

def test_ticket_export_changes_by_content(tickets_config, exports, instance):
    register(instance, "tickets", "issues")
    first = tick(ticket_exports_sensor, tickets_config, instance)
    [request] = first.run_requests
    assert request.tags["jarvis/changed_paths"] == "(all)"  # nothing published yet
    assert request.tags["jarvis/reason"] == "not published yet"
    assert not tick(ticket_exports_sensor, tickets_config, instance, first.cursor).run_requests

    edit_issue(exports, "title", "Logger sleeps too long (edited)")
    edited = tick(ticket_exports_sensor, tickets_config, instance, first.cursor)
    [request] = edited.run_requests
    assert request.run_key != first.run_requests[0].run_key


def test_after_a_publish_only_content_changes_request_a_run(tickets_config, exports, instance):
    """A daemon restart (no cursor) requests nothing for an export already published; a
    touched but identical file requests nothing; an edited one names the file."""
    publish(tickets_config)
    register(instance, "tickets", "issues")
    restarted = tick(ticket_exports_sensor, tickets_config, instance)
    assert not restarted.run_requests

    issues = exports / "issues.json"
    issues.write_bytes(issues.read_bytes())
    os.utime(issues, ns=(issues.stat().st_atime_ns, issues.stat().st_mtime_ns + 10**9))
    touched = tick(ticket_exports_sensor, tickets_config, instance, restarted.cursor)
    assert not touched.run_requests and touched.cursor != restarted.cursor

    edit_issue(exports, "body", "Rewritten description.")
    (exports / "more.json").write_text("[]")
    [request] = tick(ticket_exports_sensor, tickets_config, instance,
                     touched.cursor).run_requests
    assert request.tags["jarvis/changed_paths"] == "issues.json, more.json"
    assert request.tags["jarvis/reason"] == "2 export files changed"


def test_a_new_ticket_set_gets_one_first_run(tickets_config, instance):
    registration = tick(source_partitions_sensor, tickets_config, instance)
    apply(registration, instance)
    record_run(instance, registration.run_requests[0])
    assert not tick(ticket_exports_sensor, tickets_config, instance).run_requests


def test_missing_export_is_logged_not_fatal(tickets_config, exports, instance, capfd):
    register(instance, "tickets", "issues")
    cursor = tick(ticket_exports_sensor, tickets_config, instance).cursor
    shutil.rmtree(exports)
    result = tick(ticket_exports_sensor, tickets_config, instance, cursor)
    assert not result.run_requests and result.cursor == cursor
    logged = capfd.readouterr().err
    assert "ticket set 'issues' not checked for changes" in logged
    assert f"export does not exist: {exports}" in logged
