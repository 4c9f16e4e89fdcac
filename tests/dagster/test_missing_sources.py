"""A source whose folder, clone or export is missing (an unmounted drive, a moved export)
fails only its own runs, with a message naming the path; the configuration still loads, so
the other sources, the sensors and the query side go on, and its stored data is kept."""

import shutil

import dagster as dg

from jarvis_assets.partitions import kind_partitions
from jarvis_assets.sources import raw_asset
from jarvis_core.sources import registry
from jarvis_pipeline.refresh import run_refresh
from jarvis_resources import build_resources
from tests.pipeline_helpers import rows, write_config

VAULT = registry.kind("vault")
raw_notes = raw_asset(VAULT, VAULT.asset)


def test_configuration_loads_with_missing_paths(tmp_path):
    config = write_config(tmp_path / "project", {"notes": tmp_path / "gone"},
                          repos={"code": str(tmp_path / "no-clone")},
                          tickets={"issues": str(tmp_path / "no-export.json")})
    assert config.source_names == ["code", "issues", "notes"]


def test_missing_vault_is_reported_and_its_notes_kept(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "One.md").write_text("# One\n\nLinks to [[Two]].\n")
    (vault / "Two.md").write_text("# Two\n")
    config = write_config(tmp_path / "project", {"notes": vault})
    resources = build_resources(str(config.config_path))
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(kind_partitions(VAULT).name, ["notes"])
        assert dg.materialize([raw_notes], partition_key="notes", resources=resources,
                              instance=instance).success
        shutil.rmtree(vault)
        result = dg.materialize([raw_notes], partition_key="notes", resources=resources,
                                instance=instance)
    [materialization] = result.asset_materializations_for_node("raw_notes")
    meta = {key: value.value for key, value in materialization.metadata.items()}
    assert meta["error"] == f"vault directory is missing: {vault}"
    assert (meta["failed"], meta["dagster/row_count"]) == (1, 2)
    assert rows(config, "SELECT path FROM notes ORDER BY path") == [("One.md",), ("Two.md",)]
    assert rows(config, "SELECT path, reason FROM ingest_failures") == [
        (".", f"vault directory is missing: {vault}")]


def test_refresh_reports_each_missing_source_and_goes_on(tmp_path):
    config = write_config(tmp_path / "project", {"notes": tmp_path / "gone"},
                          repos={"code": str(tmp_path / "no-clone")},
                          tickets={"issues": str(tmp_path / "no-export.json")})
    report = run_refresh(config)
    errors = {entry["source"]: entry["layers"] for entry in report["sources"]}
    assert errors["notes"]["raw_notes"]["failed"] == 1
    assert errors["code"]["raw_repository"]["failed"] == 1
    assert errors["issues"]["raw_tickets"]["failed"] == 1
    raw = {kind.asset.name for kind in registry.kinds()}  # each lists its own raw layer only
    assert {source: sorted(raw & set(layers)) for source, layers in errors.items()} == {
        "notes": ["raw_notes"], "code": ["raw_repository"], "issues": ["raw_tickets"]}
    assert dict(rows(config, "SELECT source, reason FROM ingest_failures WHERE path = '.'")
                ) == {"notes": f"vault directory is missing: {tmp_path / 'gone'}",
                      "code": f"{tmp_path / 'no-clone'}: repository directory does not exist",
                      "issues": f"ticket export path does not exist: "
                                f"{tmp_path / 'no-export.json'}"}
    for entry in report["sources"]:  # a warning says so; what was stored is still published
        [check] = [c for c in entry["checks"] if c["check"] == "source_reachable"]
        assert not check["passed"]
        assert check["severity"] == "WARN" and entry["ok"]
    assert report["ok"] and report["published"]["ok"]
