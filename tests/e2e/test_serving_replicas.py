"""Serving replicas: two `jarvis serve --http` processes on one data directory, four tokens
with four profiles splitting the sources, four MCP clients (the SDK's streamable HTTP
client) making 200 mixed calls while a note is edited and `jarvis refresh` publishes a new
version (jarvis_bench/load.py, as `jarvis bench load` runs it at full size). No call fails,
nothing of a left-out source comes back, the access log holds one row per call and token,
and each client's first request after the publish, on either server, is answered by the new
version. A call the access log cannot record gets an error instead of its answer."""

import os
import shutil
import sqlite3

import anyio
import pytest
import yaml
from click.testing import CliRunner
from mcp import Client

from jarvis_bench.load import measure_load
from jarvis_cli.main import cli
from jarvis_core import audit as audit_module
from jarvis_core.audit import AuditLog
from jarvis_query.mcp_assistant import build_assistant_server
from tests.pipeline_helpers import PROJECT_ROOT, SAMPLE_VAULT, copy_data

pytestmark = pytest.mark.slow

PROFILES = {"notes": ["sample"], "code": ["lumen", "lumen-github"],
            "tracker": ["lumen-jira", "lumen-mail"], "wiki": ["lumen-wiki", "sample"]}
TOOLS = {"search-semantic", "search-vault", "search-hybrid", "search-graph", "search-graphrag",
         "search-code", "get-symbol", "read", "read-note", "list-vaults", "get-vault-context",
         "health-status", "performance-metrics", "resources/read", "prompts/answer-from-notes"}


@pytest.fixture
def replicated(published_project, tmp_path):
    """The published project's data copied beside a configuration with the four profiles,
    its vault a private copy (the refresh edits it), its other sources the project's. Its
    Dagster instance is left behind: other tests' commands may be writing it meanwhile."""
    project = tmp_path / "project"
    copy_data(published_project.data_dir, project / "data")
    shutil.rmtree(project / "data" / "dagster")
    shutil.copytree(SAMPLE_VAULT, tmp_path / "vault", symlinks=True)
    (project / "sample_data").symlink_to(PROJECT_ROOT / "sample_data")
    settings = yaml.safe_load((PROJECT_ROOT / "jarvis.yaml").read_text())
    settings.update(data_dir="data", profiles=PROFILES)
    settings["vaults"] = {"sample": str(tmp_path / "vault")}
    (project / "jarvis.yaml").write_text(yaml.safe_dump(settings))
    return project / "jarvis.yaml"


def test_replicas_answer_every_call_in_profile_and_switch_together(replicated, tmp_path):
    result = measure_load(replicated, {**os.environ, "HF_HUB_OFFLINE": "1"}, tmp_path,
                          servers=2, clients=4, calls=200, refreshes=1)
    assert result["failed_calls"] == 0, result["first_errors"]
    assert result["profile_leaks"] == 0, result["first_leaks"]
    assert result["audit_rows"] == result["calls"] == 200
    assert result["audit_rows_equal_calls"], result["audit_per_token"]
    assert set(result["audit_per_token"]) == {f"load-{profile}" for profile in PROFILES}
    [refresh] = result["refreshes"]
    assert refresh["calls_during"] > 0
    assert result["every_server_switched"], result["first_request_after_publish"]
    assert sorted(result["first_request_after_publish"][refresh["version"]]) == [
        "server-0", "server-1"]
    assert len(result["versions_seen"]) == 2 and refresh["version"] in result["versions_seen"]
    assert set(result["tools"]) == TOOLS


def test_a_call_the_access_log_cannot_record_gets_no_answer(kb, tmp_path, monkeypatch):
    monkeypatch.setattr(audit_module, "BUSY_TIMEOUT_SECONDS", 0.05)
    monkeypatch.setattr(audit_module, "WRITE_PATIENCE_SECONDS", 0.3)
    audit = AuditLog(tmp_path / "audit.sqlite", kb.config.audit)
    server = build_assistant_server(kb, audit)
    holder = sqlite3.connect(tmp_path / "audit.sqlite", isolation_level=None)

    async def calls():
        async with Client(server) as client:
            holder.execute("BEGIN IMMEDIATE")  # another process writing, for too long
            withheld = await client.call_tool("search-vault", {"query": "alerting"})
            holder.execute("ROLLBACK")
            return withheld, await client.call_tool("search-vault", {"query": "alerting"})

    try:
        withheld, answered = anyio.run(calls)
        rows = audit.entries()
    finally:
        holder.close()
        audit.close()
    assert withheld.is_error and withheld.structured_content is None
    assert "could not be written" in withheld.content[0].text
    assert withheld.meta["error_type"] == "audit_unavailable"
    assert not answered.is_error and answered.structured_content["results"]
    assert [(row["tool"], row["outcome"]) for row in rows] == [("search-vault", "ok")]


def test_bench_load_refuses_bad_sizes():
    for option, value in (("--servers", "0"), ("--clients", "0"), ("--calls", "5")):
        result = CliRunner().invoke(cli, ["bench", "load", option, value])
        assert result.exit_code == 2 and f"Invalid value for '{option}'" in result.output
