"""get_vault_context through the published versions: fresh, cached, stale after a graph
change published without a snapshot, a trend across two snapshots, the CLI, and errors."""

import json
import statistics
import time

import dagster as dg
import pytest
from click.testing import CliRunner

from jarvis_assets.chunks import chunks_asset
from jarvis_assets.embeddings import embeddings
from jarvis_assets.graph import knowledge_graph
from jarvis_assets.jobs import analytics_snapshot_job, publish_serving_job
from jarvis_cli.main import cli
from jarvis_core.sources import registry
from jarvis_definitions import build_definitions
from jarvis_pipeline.refresh import register_sources, run_refresh
from jarvis_query.knowledge_base import KnowledgeBase, QueryError
from jarvis_resources import build_resources
from tests.pipeline_helpers import private_copy

pytestmark = pytest.mark.slow

PROBE = "Inbox/Analytics Probe.md"


@pytest.fixture(scope="module")
def project(published_sample, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("context")
    config = private_copy(published_sample, tmp)
    vault = tmp / "vault"
    kb = KnowledgeBase(config)
    yield config, vault, kb
    kb.close()


def context_cli(config, *args):
    result = CliRunner().invoke(cli, ["--config", str(config.config_path), "context", *args])
    return result


def test_fresh_answer_then_cached(project):
    config, _, kb = project
    first = kb.get_vault_context("sample")
    assert first["cache_hit"] is False and first["is_stale"] is False
    assert first["content_hash"] == first["published_hash"]
    assert first["summary"]["notes"] == 53 and first["summary"]["orphans"] == 1
    assert first["changes"] is None and len(first["trend"]) == 1
    assert first["generated_at"].startswith(first["snapshot_id"][:4])
    json.dumps(first)                           # what the MCP tool sends
    timings = []
    for _ in range(50):
        started = time.process_time()  # this process's CPU: other workers' load does not count
        answer = kb.get_vault_context("sample")
        timings.append(time.process_time() - started)
        assert answer["cache_hit"] is True
    assert statistics.median(timings) < 0.050    # the goal for a cached answer
    assert {k: v for k, v in answer.items() if k != "cache_hit"} == \
        {k: v for k, v in first.items() if k != "cache_hit"}


def test_unknown_vault_and_cli(project):
    config, _, kb = project
    with pytest.raises(QueryError, match="Unknown vault 'nope'"):
        kb.get_vault_context("nope")
    failed = context_cli(config, "nope")
    assert failed.exit_code == 1 and "Unknown vault 'nope'" in failed.output
    data = json.loads(context_cli(config, "sample", "--json").stdout)
    assert data["vault"] == "sample" and data["is_stale"] is False
    text = context_cli(config, "sample").stdout
    assert text.startswith("sample: snapshot ") and ", fresh" in text
    for heading in ("hubs (", "communities (", "broken links (4)", "orphans (1)",
                    "Inbox/Untitled.md", "Kafka Migration Plan"):
        assert heading in text


def test_two_snapshots_around_a_change_show_the_trend(project):
    config, vault, kb = project
    before = kb.get_vault_context("sample")
    (vault / PROBE).write_text("---\ntags: [inbox]\n---\n# Analytics probe\n\n"
                               "Picks up [[Untitled]] and mentions [[Nowhere Yet]].\n")
    report = run_refresh(config)
    assert report["ok"], report
    after = kb.get_vault_context("sample")
    assert after["cache_hit"] is False            # a new version: computed once more
    assert after["serving_version"] != before["serving_version"]
    assert [p["snapshot_id"] for p in after["trend"]] == \
        [before["snapshot_id"], after["snapshot_id"]]
    changes = after["changes"]
    # one more note; its link to the orphan Untitled makes that a dead end and the probe,
    # linked from nowhere, is no orphan (it links out); one more broken link
    assert changes["notes"] == 1 and changes["links"] == 1
    assert changes["orphans"] == -1 and changes["dead_ends"] == 1
    assert changes["broken_links"] == 1
    assert after["figures"]["orphans"] == []
    assert "Inbox/Untitled.md" in after["figures"]["dead_ends"]
    trend_chart = config.data_dir / "analytics" / "sample" / "trend.svg"
    assert b"trend over 2 snapshots" in trend_chart.read_bytes()  # drawn from the second one
    assert "since the previous snapshot: notes +1" in context_cli(config, "sample").stdout


def test_a_graph_published_without_its_snapshot_is_stale(project):
    config, vault, kb = project
    (vault / PROBE).write_text("# Analytics probe\n\nNow it links to [[Lumen]] instead.\n")
    with dg.DagsterInstance.ephemeral() as instance:
        register_sources(instance, {"sample": registry.kind("vault")})
        definitions = build_definitions(config)
        # the vault's ingestion, then its layers up to the graph without the analytics
        definitions.resolve_job_def("ingest_vault").execute_in_process(
            partition_key="sample", instance=instance)
        dg.materialize([chunks_asset(registry.kinds()), embeddings, knowledge_graph],
                       partition_key="sample", instance=instance,
                       resources=build_resources(str(config.config_path)))
        definitions.resolve_job_def(publish_serving_job.name).execute_in_process(
            instance=instance)
        stale = kb.get_vault_context("sample")
        assert stale["is_stale"] is True and stale["cache_hit"] is False
        assert stale["content_hash"] != stale["published_hash"]
        assert "STALE" in context_cli(config, "sample").stdout

        definitions.resolve_job_def(analytics_snapshot_job.name).execute_in_process(
            partition_key="sample", instance=instance)
        definitions.resolve_job_def(publish_serving_job.name).execute_in_process(
            instance=instance)
    fresh = kb.get_vault_context("sample")
    assert fresh["is_stale"] is False and len(fresh["trend"]) == 3
    assert fresh["content_hash"] == fresh["published_hash"] != stale["content_hash"]
    assert fresh["changes"]["broken_links"] == -1      # [[Nowhere Yet]] is gone
