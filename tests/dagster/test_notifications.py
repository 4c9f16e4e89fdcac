"""Failure notices: a failed run or refresh is logged, stored for `jarvis notifications` and,
when configured, POSTed to a webhook."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import dagster as dg
import pytest
from click.testing import CliRunner

from jarvis_cli.main import cli
from jarvis_core.notifications import Notice, notify, recent
from jarvis_core.settings import WEBHOOK_ENV
from jarvis_pipeline.refresh import run_refresh
from jarvis_resources import build_resources
from sensors.run_failures import run_failure_notices
from tests.pipeline_helpers import write_config


@pytest.fixture
def webhook():
    """A local HTTP endpoint that keeps the JSON bodies POSTed to it."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (the http.server hook name)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", received
    server.shutdown()


def test_notice_is_stored_and_posted(tmp_path, webhook):
    url, received = webhook
    path = tmp_path / "notifications.sqlite"
    stored = notify(path, Notice(kind="run_failure", title="Jarvis run failed: x",
                                 message="boom", job="refresh_sources", run_id="r1",
                                 partition="work", failed_steps=["chunks"]), webhook_url=url)
    assert stored["webhook"] == "200"
    assert received[0]["message"] == "boom" and received[0]["partition"] == "work"
    assert received[0]["source"] == "jarvis"
    [row] = recent(path)
    assert row["title"] == "Jarvis run failed: x" and row["failed_steps"] == ["chunks"]
    assert row["webhook"] == "200"


def test_unreachable_webhook_is_recorded_not_raised(tmp_path):
    path = tmp_path / "notifications.sqlite"
    stored = notify(path, Notice(kind="run_failure", title="t", message="m"),
                    webhook_url="http://127.0.0.1:9/nothing-listens-here")
    assert stored["webhook"].startswith("failed:")
    assert recent(path)[0]["webhook"].startswith("failed:")


def test_recent_without_any_notice_is_empty(tmp_path):
    assert recent(tmp_path / "missing.sqlite") == []


@dg.op
def broken_step():
    raise ValueError("vault exploded")


@dg.job
def failing_job():
    broken_step()


def test_run_failure_sensor_records_the_failed_run(tmp_path, monkeypatch):
    monkeypatch.delenv(WEBHOOK_ENV, raising=False)  # the configuration reads it
    config = write_config(tmp_path / "project", {})
    with dg.DagsterInstance.ephemeral() as instance:
        result = failing_job.execute_in_process(instance=instance, raise_on_error=False,
                                                tags={"dagster/partition": "work"})
        context = dg.build_run_status_sensor_context(
            sensor_name=run_failure_notices.name, dagster_event=result.get_run_failure_event(),
            dagster_instance=instance, dagster_run=result.dagster_run,
            resources={"jarvis": build_resources(str(config.config_path))["jarvis"]},
        ).for_run_failure()
        run_failure_notices(context)
    [notice] = recent(config.notifications_path)
    assert notice["kind"] == "run_failure"
    assert notice["job"] == "failing_job" and notice["partition"] == "work"
    assert notice["run_id"] == result.run_id
    assert notice["failed_steps"] == ["broken_step"]
    assert notice["title"] == "Jarvis run failed: failing_job [work]"
    assert notice["message"] == "broken_step: ValueError: vault exploded"


def test_failed_refresh_leaves_a_notice_the_cli_shows(tmp_path, sample_vault):
    """A model that cannot be loaded fails the source's run: the refresh reports it, keeps
    the old version and records a notice."""
    config = write_config(tmp_path / "project", {"sample": sample_vault},
                          embedding={"model": str(tmp_path / "no-such-model")})
    report = run_refresh(config)
    assert not report["ok"] and report["published"] is None

    result = CliRunner().invoke(
        cli, ["--config", str(config.config_path), "notifications", "--json"])
    assert result.exit_code == 0, result.output
    [notice] = json.loads(result.stdout)["notifications"]
    # `jarvis refresh` runs a source's later layers as one run (refresh_sources)
    assert notice["job"] == "refresh_sources" and notice["partition"] == "sample"
    assert notice["failed_steps"] == ["chunks"]
    assert notice["message"].startswith(
        "chunks: jarvis_core.text.tokens.ModelNotFoundError: embedding model ")
    assert "no-such-model" in notice["message"]

    text = CliRunner().invoke(cli, ["--config", str(config.config_path), "notifications"])
    assert "Jarvis run failed: refresh_sources [sample]" in text.stdout
