"""The shipped sample vault, ingested: its deliberate oddities land as documented in
sample_data/VAULT_FEATURES.md."""

import json

import dagster as dg
import pytest

from tests.pipeline_helpers import SAMPLE_VAULT, rows, run, write_config


@pytest.fixture(scope="module")
def ingested(tmp_path_factory):
    config = write_config(tmp_path_factory.mktemp("project"), {"sample": SAMPLE_VAULT})
    with dg.DagsterInstance.ephemeral() as instance:
        assert run(config, "sample", instance).success
    return config


def note(config, path: str) -> dict:
    with_names = rows(config, "SELECT * FROM notes WHERE path = ?", [path])
    assert with_names, f"{path} was not ingested"
    columns = [c for (c,) in rows(config, "SELECT column_name FROM duckdb_columns() "
                                          "WHERE table_name = 'notes' ORDER BY column_index")]
    return dict(zip(columns, with_names[0]))


def test_inventory(ingested):
    assert rows(ingested, "SELECT count(*) FROM notes") == [(53,)]
    assert rows(ingested, "SELECT count(*) FROM ingest_failures") == [(0,)]
    assert sorted(rows(ingested, "SELECT path, extension FROM attachments")) == [
        ("Attachments/sensor-calibration.csv", ".csv"), ("Attachments/station-diagram.png", ".png")]


def test_empty_and_frontmatter_only_notes_are_kept_without_chunks(ingested):
    empty, prep = note(ingested, "Inbox/Untitled.md"), note(ingested, "Inbox/Vendor Call Prep.md")
    assert empty["size_bytes"] == 0 and empty["body"] == ""
    assert prep["body"].strip() == "" and prep["tags"] == ["inbox", "meeting-prep"]
    assert json.loads(prep["frontmatter_links"]) == {"related": ["Sam Novak", "TimescaleDB"]}
    assert rows(ingested, "SELECT count(*) FROM chunks WHERE path IN "
                          "('Inbox/Untitled.md', 'Inbox/Vendor Call Prep.md')") == [(0,)]


def test_invalid_yaml_is_a_warning_and_the_body_is_still_parsed(ingested):
    log = note(ingested, "Areas/Health/Running Log.md")
    assert log["frontmatter"] == "{}"
    assert "line 4" in log["frontmatter_error"] and log["warnings"] == [log["frontmatter_error"]]
    assert {"running", "area/health"} <= set(log["tags"])
    assert {link["target"] for link in log["wikilinks"]} >= {"Lisbon Trip Plan", "Sleep"}
    assert rows(ingested, "SELECT count(*) > 0 FROM chunks WHERE path = ?",
                ["Areas/Health/Running Log.md"]) == [(True,)]


def test_text_inside_code_is_neither_link_nor_tag(ingested):
    conventions = note(ingested, "Areas/Knowledge/Vault Conventions.md")
    firmware = note(ingested, "Projects/Lumen/Architecture/Station Firmware Protocol.md")
    for parsed in (conventions, firmware):
        targets = {link["target"] for link in parsed["wikilinks"] + parsed["embeds"]}
        assert not targets & {"not a link", "also not a link", "not-an-embed", "A", "B",
                              "Note A", "Note B"}
        assert not set(parsed["tags"]) & {"not-a-tag", "nope"}
    assert not [r for r in conventions["relations"] if r["line"] > 0]


def test_string_forms_of_tags_and_aliases(ingested):
    lumen = note(ingested, "Projects/Lumen/Lumen.md")
    assert {"project", "lumen"} <= set(lumen["tags"])
    assert note(ingested, "People/Daniel Okafor.md")["aliases"] == ["Dan"]


def test_daily_note_dates_and_accented_file_name(ingested):
    daily = note(ingested, "Daily/2026-10-05.md")
    assert daily["created_at"].date().isoformat() == "2026-10-05"
    cafe = note(ingested, "Personal/Café Notes.md")
    assert cafe["note_key"] == "note:sample/Personal/Café Notes.md"


def test_long_notes_span_several_chunks_with_heading_paths(ingested):
    [(count, with_heading)] = rows(ingested, """
        SELECT count(*), count(*) FILTER (WHERE len(heading_path) > 0) FROM chunks
        WHERE path = 'Projects/Lumen/Architecture/Ingest API.md'""")
    assert count >= 4 and with_heading == count
