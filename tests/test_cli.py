"""The `jarvis` command: refresh and status, readable and --json, with clear errors."""

import json

from click.testing import CliRunner

from jarvis_cli.main import cli


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
    assert all(check["passed"] for check in source["checks"])

    second = json.loads(invoke("--config", config, "refresh", "--json").stdout)
    assert second["sources"][0]["layers"]["raw_notes"]["unchanged"] == 53
    assert second["sources"][0]["layers"]["chunks"]["new"] == 0

    status = json.loads(invoke("--config", config, "status", "--json").stdout)
    [row] = status["sources"]
    assert (row["name"], row["kind"], row["notes"]) == ("sample", "vault", 53)
    assert row["chunks"] == source["layers"]["chunks"]["rows"] == row["vectors"]
    assert row["edges"] > 0 and row["broken_links"] == 6
    assert status["published"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"


def test_readable_output(sample_config):
    config = str(sample_config.config_path)
    refreshed = invoke("--config", config, "refresh")
    assert "raw_notes" in refreshed.output and "sample: ok" in refreshed.output
    status = invoke("--config", config, "status")
    assert "sample" in status.output and "vault" in status.output


def test_errors_name_the_problem(tmp_path, sample_config):
    missing = invoke("--config", str(tmp_path / "nope.yaml"), "status")
    assert missing.exit_code == 1 and "configuration file not found" in missing.output
    unknown = invoke("--config", str(sample_config.config_path), "refresh", "--source", "work")
    assert unknown.exit_code == 1 and "unknown source(s) work" in unknown.output
    not_yet = invoke("--config", str(sample_config.config_path), "status")
    assert not_yet.exit_code == 1 and "run `jarvis refresh` first" in not_yet.output
