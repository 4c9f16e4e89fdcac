"""The repository and ticket sensors: a run when a head moved or an export's content changed,
and only then, with a cursor that survives restarts and falls back to the published
version."""

import json
import os
import shutil
import subprocess

import dagster as dg
import pytest

from jarvis_assets.partitions import source_partitions
from jarvis_cli.refresh import run_refresh
from jarvis_resources import build_resources
from sensors.source_changes import repo_changes_sensor, ticket_exports_sensor
from tests.conftest import PROJECT_ROOT, write_config

SAMPLE_GITHUB = PROJECT_ROOT / "sample_data" / "tickets" / "github"


def git(repo, *args) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Dana Kim", "GIT_AUTHOR_EMAIL": "dana@example.com",
           "GIT_COMMITTER_NAME": "Dana Kim", "GIT_COMMITTER_EMAIL": "dana@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def commit(repo, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-q", "-m", f"Add {name}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "code"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    commit(path, "README.md", "# Code\n")
    return path


@pytest.fixture
def exports(tmp_path):
    path = tmp_path / "issues"
    shutil.copytree(SAMPLE_GITHUB, path)
    return path


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def tick(sensor, config, instance, cursor=None) -> dg.SensorResult:
    context = dg.build_sensor_context(instance=instance, cursor=cursor,
                                      resources={"jarvis": build_resources(config)["jarvis"]})
    return sensor(context)


def register(instance, *names):
    instance.add_dynamic_partitions(source_partitions.name, list(names))


def test_repo_head_moves_request_one_run_each(tmp_path, repo, instance):
    config = write_config(tmp_path / "project", {}, repos={"code": str(repo)})
    register(instance, "code")
    first = tick(repo_changes_sensor, config, instance)
    [request] = first.run_requests  # nothing published yet
    head = git(repo, "rev-parse", "HEAD")
    assert request.partition_key == "code" and request.tags["jarvis/head"] == head
    assert request.tags["jarvis/previous_head"] == "(none)"

    idle = tick(repo_changes_sensor, config, instance, first.cursor)
    assert not idle.run_requests and idle.cursor == first.cursor

    new_head = commit(repo, "app.py", "print('hi')\n")
    moved = tick(repo_changes_sensor, config, instance, idle.cursor)
    [request] = moved.run_requests
    assert request.run_key == f"code-{new_head}"
    assert request.tags["jarvis/previous_head"] == head

    git(repo, "reset", "-q", "--hard", "HEAD~1")  # history rewritten: a force-push
    rewritten = commit(repo, "app.py", "print('hello')\n")
    [request] = tick(repo_changes_sensor, config, instance, moved.cursor).run_requests
    assert request.tags["jarvis/head"] == rewritten != new_head


def test_repo_by_url_is_checked_without_cloning(tmp_path, repo, instance):
    bundle = tmp_path / "code.bundle"
    git(repo, "bundle", "create", "-q", str(bundle), "--all")
    config = write_config(tmp_path / "project", {}, repos={"code": {"url": str(bundle),
                                                                    "branch": "main"}})
    register(instance, "code")
    [request] = tick(repo_changes_sensor, config, instance).run_requests
    assert request.tags["jarvis/head"] == git(repo, "rev-parse", "HEAD")
    assert not (config.data_dir / "repos").exists()


def test_broken_repo_is_logged_and_the_others_still_checked(tmp_path, repo, instance, capfd):
    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    config = write_config(tmp_path / "project", {},
                          repos={"code": str(repo), "plain": str(not_a_repo)})
    register(instance, "code", "plain")
    result = tick(repo_changes_sensor, config, instance)
    assert [r.partition_key for r in result.run_requests] == ["code"]
    logged = capfd.readouterr().err
    assert "repository 'plain' not checked for changes" in logged
    assert "plain: not a git repository" in logged


def test_unregistered_sources_are_left_to_the_partition_owner(tmp_path, repo, exports,
                                                              instance):
    config = write_config(tmp_path / "project", {}, repos={"code": str(repo)},
                          tickets={"issues": {"path": str(exports), "repo": "acme/lumen"}})
    assert not tick(repo_changes_sensor, config, instance).run_requests
    assert not tick(ticket_exports_sensor, config, instance).run_requests


def test_ticket_export_changes_by_content(tmp_path, exports, instance):
    config = write_config(tmp_path / "project", {},
                          tickets={"issues": {"path": str(exports), "repo": "acme/lumen"}})
    register(instance, "issues")
    first = tick(ticket_exports_sensor, config, instance)
    [request] = first.run_requests
    assert request.tags["jarvis/changed_paths"] == "(all)"  # nothing published yet
    assert not tick(ticket_exports_sensor, config, instance, first.cursor).run_requests

    issues = exports / "issues.json"
    data = json.loads(issues.read_text())
    data[0]["title"] += " (edited)"
    issues.write_text(json.dumps(data))
    edited = tick(ticket_exports_sensor, config, instance, first.cursor)
    [request] = edited.run_requests
    assert request.run_key != first.run_requests[0].run_key


def test_missing_export_is_logged_not_fatal(tmp_path, exports, instance, capfd):
    config = write_config(tmp_path / "project", {},
                          tickets={"issues": {"path": str(exports), "repo": "acme/lumen"}})
    register(instance, "issues")
    cursor = tick(ticket_exports_sensor, config, instance).cursor
    shutil.rmtree(exports)
    result = tick(ticket_exports_sensor, config, instance, cursor)
    assert not result.run_requests and result.cursor == cursor
    assert "ticket set 'issues' not checked for changes" in capfd.readouterr().err


@pytest.mark.slow
def test_after_a_refresh_an_empty_cursor_compares_with_the_published_version(
        tmp_path, repo, exports, instance):
    """A daemon restart (no cursor) requests nothing for sources already published; a touched
    but identical export requests nothing; an edited one names the file."""
    config = write_config(tmp_path / "project", {}, repos={"code": str(repo)},
                          tickets={"issues": {"path": str(exports), "repo": "acme/lumen"}})
    assert run_refresh(config)["ok"]
    register(instance, "code", "issues")
    assert not tick(repo_changes_sensor, config, instance).run_requests
    tickets = tick(ticket_exports_sensor, config, instance)
    assert not tickets.run_requests

    issues = exports / "issues.json"
    issues.write_bytes(issues.read_bytes())
    os.utime(issues, ns=(issues.stat().st_atime_ns, issues.stat().st_mtime_ns + 10**9))
    touched = tick(ticket_exports_sensor, config, instance, tickets.cursor)
    assert not touched.run_requests and touched.cursor != tickets.cursor

    data = json.loads(issues.read_text())
    data[0]["body"] = "Rewritten description."
    issues.write_text(json.dumps(data))
    [request] = tick(ticket_exports_sensor, config, instance, touched.cursor).run_requests
    assert request.tags["jarvis/changed_paths"] == "issues.json"
