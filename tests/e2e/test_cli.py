"""The `jarvis` command: refresh and status, readable and --json, errors (JSON with --json,
naming the flags), the UI launcher, and query commands that stay light."""

import json
import os
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from jarvis_cli.main import cli
from tests.pipeline_helpers import PROJECT_ROOT, copy_data, report_check, write_config
from tests.query_helpers import heavy, jarvis_modules, light_copy

VAULT_CHECKS = (("raw_notes", "source_reachable"), ("raw_notes", "failed_file_ratio"),
                ("chunks", "every_document_has_chunks"), ("chunks", "chunks_within_token_limit"),
                ("keyword_index", "keyword_index_matches_chunks"),
                ("knowledge_graph", "no_dangling_edges"),
                ("knowledge_graph", "every_edge_has_evidence"),
                ("embeddings", "vectors_match_chunks"))


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_refresh_then_status_as_json(sample_config):
    config = str(sample_config.config_path)
    first = invoke("--config", config, "refresh", "--json")
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    [source] = report["sources"]
    assert report["ok"] and source["source"] == "sample"
    assert source["layers"]["raw_notes"]["new"] == 53
    assert source["layers"]["chunks"]["rows"] > 53
    # every layer of a vault ran its checks, and each passed
    for asset, name in VAULT_CHECKS:
        assert report_check(source["checks"], name, asset)["passed"], (asset, name)
    assert all(check["passed"] for check in source["checks"])
    # a vault's layers and checks only: no other kind's raw layer
    assert set(source["layers"]) == {"raw_notes", "chunks", "keyword_index", "embeddings",
                                     "knowledge_graph", "vault_analytics"}
    assert {check["asset"] for check in source["checks"]} == set(source["layers"])

    second = json.loads(invoke("--config", config, "refresh", "--json").stdout)
    # nothing changed: nothing runs, the published version stays
    assert second["ok"] and second["sources"] == [] and second["reasons"] == {}
    assert second["version"] == report["version"]

    status = json.loads(invoke("--config", config, "status", "--json").stdout)
    [row] = status["sources"]
    assert (row["name"], row["kind"], row["notes"]) == ("sample", "vault", 53)
    assert row["chunks"] == source["layers"]["chunks"]["rows"] == row["vectors"]
    assert row["edges"] > 0 and row["broken_links"] == 5  # VAULT_FEATURES.md section 9
    assert status["published"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_readable_output(sample_config):
    config = str(sample_config.config_path)
    refreshed = invoke("--config", config, "refresh")
    assert "raw_notes" in refreshed.output
    assert not [raw for raw in ("raw_repository", "raw_tickets", "raw_mail", "raw_pages")
                if raw in refreshed.output]
    assert "sample (nothing published yet): ok" in refreshed.output
    status = invoke("--config", config, "status")
    assert "sample" in status.output and "vault" in status.output


def test_errors_name_the_problem(tmp_path, sample_config):
    missing = invoke("--config", str(tmp_path / "nope.yaml"), "status")
    assert missing.exit_code == 1 and "configuration file not found" in missing.output
    unknown = invoke("--config", str(sample_config.config_path), "refresh", "--source", "work")
    assert unknown.exit_code == 1 and "unknown source(s) work" in unknown.output
    not_yet = invoke("--config", str(sample_config.config_path), "status")
    assert not_yet.exit_code == 1 and "run `jarvis refresh` first" in not_yet.output


def test_with_json_every_error_is_json_with_a_non_zero_exit(tmp_path, sample_config):
    config = str(sample_config.config_path)
    cases = [
        (["--config", str(tmp_path / "nope.yaml"), "status"], 1, "configuration file not found"),
        (["status"], 1, "run `jarvis refresh` first"),
        (["search", "x", "--limit", "0"], 1, "--limit must be between 1 and 50"),
        (["search", "x", "--limit", "many"], 2, "Invalid value for '--limit'"),
        (["keyword", "x", "--vault", "nope"], 1, "Unknown vault 'nope'"),
        (["graph", "Alerting", "--depth", "9"], 1, "--depth must be between 1 and 3"),
        (["graphrag", "x", "--max-tokens", "5"], 1, "--max-tokens must be between 200"),
        (["read", "../secret.md"], 1, "Access denied: '..' is not allowed"),
        (["context", "nope"], 1, "Unknown vault 'nope'"),
        (["vaults", "--bogus"], 2, "No such option '--bogus'"),
        (["refresh", "--source", "work"], 1, "unknown source(s) work"),
    ]
    for args, exit_code, message in cases:
        if args[0] != "--config":
            args = ["--config", config, *args]
        result = CliRunner().invoke(cli, [*args, "--json"])
        assert result.exit_code == exit_code, (args, result.output)
        assert message in json.loads(result.stdout)["error"], (args, result.stdout)


def test_date_errors_name_the_flags(sample_config):
    config = str(sample_config.config_path)
    bad = CliRunner().invoke(cli, ["--config", config, "hybrid", "sleep", "--after", "yesterday"])
    assert bad.exit_code == 1
    assert "Error: --after must be an ISO date or date-time, got 'yesterday'" in bad.output
    assert "modified_after" not in bad.output
    crossed = CliRunner().invoke(cli, ["--config", config, "hybrid", "sleep", "--after",
                                       "2026-02-01", "--before", "2026-01-01"])
    assert "--after must not be later than --before" in crossed.output


def test_ui_starts_the_dagster_beside_its_own_interpreter(sample_config, monkeypatch, tmp_path):
    """`.venv/bin/jarvis ui` without an activated venv: nothing on PATH."""
    started = []
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.setenv("JARVIS_CONFIG", str(sample_config.config_path))
    monkeypatch.setattr(os, "execv", lambda path, args: started.append((path, args)))
    monkeypatch.chdir(PROJECT_ROOT)
    result = invoke("--config", str(sample_config.config_path), "ui", "--port", "3999")
    assert result.exit_code == 0, result.output
    dagster = Path(sys.executable).parent / "dagster"
    assert dagster.is_file()
    workspace = str(PROJECT_ROOT / "workspace.yaml")
    assert started == [(dagster, [str(dagster), "dev", "-p", "3999", "-w", workspace])]
    assert os.environ["DAGSTER_HOME"] == str(tmp_path / "dagster")

    started.clear()
    result = invoke("--config", str(sample_config.config_path), "daemon")
    assert result.exit_code == 0, result.output
    daemon = Path(sys.executable).parent / "dagster-daemon"
    assert started == [(daemon, [str(daemon), "run", "-w", workspace])]


def test_status_reads_the_published_version_while_a_refresh_writes(published_sample, tmp_path):
    copy_data(published_sample.data_dir, tmp_path / "data")
    later = tmp_path / "later"
    later.mkdir()
    (later / "Note.md").write_text("# Later\n")
    config = write_config(tmp_path, {"sample": published_sample.sources["sample"].path,
                                     "later": later})
    with duckdb.connect(str(config.duckdb_path)):  # the writer's lock, as a refresh holds it
        result = invoke("--config", str(config.config_path), "status", "--json")
        readable = invoke("--config", str(config.config_path), "status").stdout
    rows = {row["name"]: row for row in json.loads(result.stdout)["sources"]}
    assert rows["sample"]["published"] and rows["sample"]["notes"] == 53
    assert rows["sample"]["chunks"] == rows["sample"]["vectors"] > 53
    assert not rows["later"]["published"] and rows["later"]["notes"] == 0
    assert [line.split()[:3] for line in readable.splitlines() if line.startswith("later")] == [
        ["later", "vault", "no"]]


def test_readable_graph_counts_repeated_pairs(published_sample):
    result = invoke("--config", str(published_sample.config_path), "graph", "Alerting")
    pairs = [line for line in result.stdout.splitlines() if " → " in line]
    assert "  Ingest API → TimescaleDB  ×2" in pairs
    sections = result.stdout.split("\n\n")
    for section in sections:  # within a relation, each pair of notes is listed once
        listed = [line.split("  ×")[0] for line in section.splitlines() if " → " in line]
        assert len(listed) == len(set(listed)), section


@pytest.fixture(scope="module")
def light_sample(published_sample, tmp_path_factory):
    return light_copy(published_sample, tmp_path_factory.mktemp("light-sample"))


def test_help_and_query_commands_import_neither_dagster_nor_torch(light_sample):
    config = light_sample
    completed, modules = jarvis_modules("--help")
    assert completed.returncode == 0 and "Commands:" in completed.stdout
    assert not {"dagster", "torch", "mcp", "duckdb", "onnxruntime", "numpy"} & modules
    for args in (["keyword", "alerting"], ["hybrid", "retried writes"], ["graph", "Alerting"],
                 ["graphrag", "alerting rules", "--limit", "3"], ["vaults"], ["status"]):
        completed, modules = jarvis_modules("--config", str(config.config_path), *args)
        assert completed.returncode == 0, completed.stderr
        assert heavy(modules) == [], (args, heavy(modules))
        assert not {"mcp", "neo4j", "qdrant_client"} & modules, args


def test_bench_coldstart_measures_every_command_and_the_light_query_path(light_sample):
    result = invoke("--config", str(light_sample.config_path), "bench", "coldstart", "--runs",
                    "1", "--json")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert figures["encoder"] == "encoder" and figures["heavy_modules_imported"] == []
    assert set(figures["commands"]) == {
        "python_pass", "python_import_numpy", "jarvis_help", "jarvis_keyword", "jarvis_search",
        "jarvis_hybrid", "jarvis_graph", "jarvis_serve_first_answer", "mcp_sdk_first_answer"}
    serve = figures["commands"]["jarvis_serve_first_answer"]
    sdk_server = figures["commands"]["mcp_sdk_first_answer"]
    assert {"initialize_s", "tools_list_s"} <= set(serve) & set(sdk_server)
    assert "mcp" in serve["packages"] and "onnxruntime" in serve["packages"]
    assert "mcp" in sdk_server["packages"] and "jarvis_query" not in sdk_server["packages"]
    assert "mcp" not in figures["commands"]["jarvis_search"]["packages"]
    assert set(figures["ratios"]) == {f"{name}_{figure}" for figure in ("wall", "cpu") for name in
                                      ("search_over_keyword", "search_over_numpy",
                                       "mcp_first_answer_over_search",
                                       "mcp_first_answer_over_sdk_server")}
