"""Memory end to end, through the MCP SDK's client: remembered notes land on disk, are found
after the memory vault's refresh, are recalled ranked by the seed's formula with their
frequency read from the access log, fade into the archive by the decay schedule and are
forgotten on request; the access log holds every call of the session with its documents;
`jarvis remember` and `jarvis audit` do the same from the terminal."""

import json
import math
import shutil
from datetime import UTC, datetime, timedelta

import anyio
import dagster as dg
import jsonschema
import pytest
from click.testing import CliRunner
from mcp import Client

from jarvis_cli.main import cli
from jarvis_core.audit import AuditLog, audit_path
from jarvis_core.memory import MemoryVault, decay_memories
from jarvis_core.sources.vault.notes import parse_note
from jarvis_pipeline.refresh import run_refresh
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.mcp_assistant import build_assistant_server
from jarvis_query.memory import FREQUENCY_SATURATION, WEIGHTS
from schedules.memory_decay import memory_decay_schedule
from tests.pipeline_helpers import SAMPLE_VAULT, write_config

pytestmark = pytest.mark.slow

REMEMBERED = [  # (text, importance, tags) remembered through MCP
    ("Station LX-12's frost sensor was recalibrated on site; readings before the visit read "
     "two degrees low.", 0.9, ["lumen", "stations"]),
    ("Maya wants new alert rules reviewed on Tuesdays, before the frost season.", 0.3,
     ["lumen"]),
    ("The dashboard draws its charts with uPlot.", 0.5, []),
]


async def _calls(server, calls: list) -> tuple[dict, list]:
    """Each call through the SDK's in-process client: (tools by name, results)."""
    async with Client(server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        return tools, [await client.call_tool(name, arguments) for name, arguments in calls]


def converse(config, calls: list):
    kb = KnowledgeBase(config)
    audit = AuditLog(audit_path(config.data_dir), config.audit)
    server = build_assistant_server(kb, audit, "personal")
    try:
        tools, results = anyio.run(_calls, server, calls)
    finally:
        kb.close()
        audit.close()
    return server.access.session, tools, results


@pytest.fixture(scope="module")
def memories(tmp_path_factory):
    """Three memories remembered over MCP and two older ones written a hundred days ago,
    the memory vault refreshed, then a second session that uses them."""
    root = tmp_path_factory.mktemp("memory")
    shutil.copytree(SAMPLE_VAULT, root / "vault", symlinks=True)
    (root / "memory").mkdir()
    with pytest.MonkeyPatch.context() as env:
        for name in ("JARVIS_HOME", "JARVIS_CONFIG", "DAGSTER_HOME"):
            env.delenv(name, raising=False)
        config = write_config(root / "project", {"sample": root / "vault",
                                                 "memory": root / "memory"},
                              memory={"vault": "memory", "decay_after_days": 60},
                              profiles={"personal": ["sample", "memory"]})
        assert run_refresh(config)["ok"]
        first_session, tools, written = converse(config, [
            ("remember", {"text": text, "importance": importance, "tags": tags})
            for text, importance, tags in REMEMBERED])
        vault = MemoryVault.from_config(config)
        long_ago = datetime.now(UTC) - timedelta(days=100)
        old_used = vault.write("The old ingest cluster lived in rack 7 of the Ostrava data "
                               "centre.", importance=0.4, now=long_ago)
        old_unused = vault.write("The office coffee machine takes 20 cent coins only.",
                                 importance=0.2, now=long_ago)
        assert run_refresh(config, ["memory"])["ok"]
        reads = [("read-note", {"path": old_used.path, "vault": "memory"})] * 3
        calls = [("search-vault", {"query": "frost sensor recalibrated", "search_content": True,
                                   "vault": "memory"}),
                 *reads,
                 ("recall", {"query": "where did the ingest cluster live, frost sensors",
                             "limit": 3}),
                 ("recall", {"query": "frost", "token_budget": 100}),
                 ("health-status", {}), ("performance-metrics", {"hours": 1})]
        audit = AuditLog(audit_path(config.data_dir), config.audit)
        uses_before = audit.uses(vault.documents(old_used))
        audit.close()
        second_session, _, results = converse(config, calls)
    return {"config": config, "tools": tools, "written": written, "vault": vault,
            "old_used": old_used, "old_unused": old_unused, "calls": calls,
            "results": results, "sessions": (first_session, second_session),
            "uses_before": sum(uses_before.values())}


def test_a_memory_written_through_mcp_is_a_note_on_disk(memories):
    vault = memories["vault"]
    for result, (text, importance, tags) in zip(memories["written"], REMEMBERED, strict=True):
        assert not result.is_error, result.content[0].text
        written = result.structured_content["memory"]
        assert written["uri"] == f"jarvis://memory/{written['path']}".replace(" ", "%20")
        note = parse_note((vault.root / written["path"]).read_text(), path=written["path"])
        assert note.frontmatter["importance"] == importance
        assert note.frontmatter["type"] == "memory"
        assert note.frontmatter["client"] == written["client"]
        assert note.frontmatter["conversation"] == memories["sessions"][0]
        assert set(tags) | {"memory"} <= set(note.tags)
        assert text in (vault.root / written["path"]).read_text()


def test_it_is_found_by_search_after_the_vaults_refresh(memories):
    found = memories["results"][0].structured_content["results"]
    remembered = memories["written"][0].structured_content["memory"]["path"]
    assert found and found[0]["path"] == remembered and found[0]["vault"] == "memory"


def test_recall_ranks_by_the_seeds_formula_with_frequency_from_the_access_log(memories):
    answer = memories["results"][4].structured_content
    assert answer["weights"] == WEIGHTS
    ranked = answer["memories"]
    assert [m["score"] for m in ranked] == sorted((m["score"] for m in ranked), reverse=True)
    for memory in ranked:
        parts = memory["components"]
        assert memory["score"] == pytest.approx(sum(WEIGHTS[n] * parts[n] for n in WEIGHTS),
                                                abs=2e-3)
        assert parts["frequency"] == pytest.approx(
            min(1, math.log1p(memory["uses"]) / math.log1p(FREQUENCY_SATURATION)), abs=1e-3)
        assert memory["importance"] == parts["importance"]
    by_path = {m["path"]: m for m in ranked}
    used = by_path[memories["old_used"].path]
    assert used["uses"] == memories["uses_before"] + 3  # the three read-note calls
    assert used["components"]["frequency"] > 0
    assert used["components"]["recency"] < 0.2  # a hundred days, half-life 30
    fresh = [by_path[r.structured_content["memory"]["path"]] for r in memories["written"]
             if r.structured_content["memory"]["path"] in by_path]
    assert fresh and all(m["components"]["recency"] > 0.99 for m in fresh)
    assert all(not m["archived"] for m in ranked)
    assert answer["tokens"] <= answer["token_budget"] == 1500


def test_recall_packs_into_the_token_budget(memories):
    answer = memories["results"][5].structured_content
    assert answer["token_budget"] == 100
    assert answer["tokens"] <= 100 and answer["omitted"] >= 1
    assert sum(m["tokens"] for m in answer["memories"]) + 2 == answer["tokens"]


def test_every_call_of_the_session_is_in_the_access_log_with_its_documents(memories):
    config = memories["config"]
    audit = AuditLog(audit_path(config.data_dir), config.audit)
    entries = audit.entries(session=memories["sessions"][1])
    audit.close()
    assert [e["tool"] for e in entries] == [name for name, _ in memories["calls"]]
    for entry, result in zip(entries, memories["results"], strict=True):
        assert entry["outcome"] == "ok" and entry["profile"] == "personal"
        assert entry["correlation_id"] == result.structured_content["correlation_id"]
    search, read = entries[0], entries[1]
    assert search["documents"] == [f"memory/{h['path']}" for h in
                                   memories["results"][0].structured_content["results"]]
    assert read["documents"] == [memories["old_used"].document]
    recalled = memories["results"][4].structured_content["memories"]
    assert entries[4]["documents"] == [f"memory/{m['path']}" for m in recalled]


def test_every_answer_validates_against_its_declared_output_schema(memories):
    tools = memories["tools"]
    for (name, _), result in zip(memories["calls"], memories["results"], strict=True):
        assert tools[name].output_schema["type"] == "object"
        jsonschema.validate(result.structured_content, tools[name].output_schema)
    for result in memories["written"]:
        jsonschema.validate(result.structured_content, tools["remember"].output_schema)
    assert not tools["remember"].annotations.read_only_hint
    assert not tools["forget"].annotations.read_only_hint
    assert tools["recall"].annotations.read_only_hint


def test_the_decay_schedule_archives_old_unused_memories_and_deletes_nothing(memories):
    config, vault = memories["config"], memories["vault"]
    schedule = memory_decay_schedule(config)
    with dg.build_schedule_context(scheduled_execution_time=datetime(2026, 11, 25, 4, 15)
                                   ) as context:
        [request] = schedule.evaluate_tick(context).run_requests
    assert request.run_key == "memory_decay-202611250415"
    before = sorted(p.name for p in vault.root.rglob("*.md"))
    report = decay_memories(config)
    assert report["archived"] == [vault.archived_path(memories["old_unused"].path)]
    assert not (vault.root / memories["old_unused"].path).exists()
    assert (vault.root / memories["old_used"].path).exists()  # old, but read
    assert sorted(p.name for p in vault.root.rglob("*.md")) == before
    assert run_refresh(config, ["memory"])["ok"]
    _, _, (plain, archive) = converse(config, [
        ("recall", {"query": "coffee machine coins"}),
        ("recall", {"query": "coffee machine coins", "include_archive": True})])
    assert memories["old_unused"].path not in [m["path"] for m in
                                              plain.structured_content["memories"]]
    [archived] = [m for m in archive.structured_content["memories"] if m["archived"]]
    assert archived["path"] == report["archived"][0]


def test_forget_archives_one_memory(memories):
    config = memories["config"]
    target = memories["written"][2].structured_content["memory"]
    _, _, (forgotten, again) = converse(config, [("forget", {"memory": target["id"]}),
                                                 ("forget", {"memory": target["path"]})])
    moved = forgotten.structured_content["archived_to"]
    assert moved["archived"] and (memories["vault"].root / moved["path"]).exists()
    assert not (memories["vault"].root / target["path"]).exists()
    assert again.is_error and "no memory at" in again.content[0].text


def test_the_terminal_remembers_and_lists_the_access_log(memories):
    config = memories["config"]
    runner = CliRunner()
    written = runner.invoke(cli, ["--config", str(config.config_path), "remember",
                                  "Calibration kits are in the blue cabinet.", "--importance",
                                  "0.7", "--tag", "lab", "--json"])
    assert written.exit_code == 0, written.output
    memory = json.loads(written.output)["memory"]
    assert (memories["vault"].root / memory["path"]).is_file()
    listed = runner.invoke(cli, ["--config", str(config.config_path), "audit", "--client",
                                 "cli", "--since", "1h", "--json"])
    assert listed.exit_code == 0, listed.output
    [entry] = json.loads(listed.output)["entries"]
    assert (entry["tool"], entry["documents"]) == ("remember", [f"memory/{memory['path']}"])
    text = runner.invoke(cli, ["--config", str(config.config_path), "audit", "--since", "1h"])
    assert "remember" in text.output and "recall" in text.output
    bad = runner.invoke(cli, ["--config", str(config.config_path), "audit", "--since", "soon"])
    assert bad.exit_code == 2 and "neither an ISO date" in bad.output
