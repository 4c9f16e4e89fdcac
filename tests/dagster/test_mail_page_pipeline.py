"""Mail sources and Confluence exports end to end: real mbox, Maildir and .eml files and both
export shapes (REST JSON, an HTML space export zip) through every layer beside a vault, a git
repository and the sample Jira export; threads across files, people folded with git and Jira,
page hierarchy, cross-source edges both ways, bad input reported per item, and incremental
runs (a grown mbox, an edited page, a deleted page gone from every layer)."""

import json
import os
import shutil

import dagster as dg
import pytest
import yaml

from jarvis_core.config import load_config
from jarvis_core.pending import pending_sources
from jarvis_core.sources.confluence.graph import page_key
from jarvis_core.sources.mail.graph import thread_key
from jarvis_core.stores import serving
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_core.stores.keyword import KeywordSearcher
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_pipeline.refresh import run_refresh
from tests.dagster.sensor_helpers import CHANGE_SENSORS, register, tick
from tests.export_helpers import (
    DANIEL,
    MAYA,
    SAM,
    SAM_ACCOUNT,
    WIKI,
    export_index,
    export_page,
    jira_macro,
    mention,
    message,
    page_link,
    rest_page,
    write_maildir,
    write_mbox,
    write_rest_export,
    zip_folder,
)
from tests.pipeline_helpers import PROJECT_ROOT, metadata, report_check, rows, run
from tests.source_helpers import Repo

pytestmark = pytest.mark.slow

mail_changes_sensor = CHANGE_SENSORS["mail"]
confluence_exports_sensor = CHANGE_SENSORS["confluence"]

MAYA_ID = ("Maya Chen", "maya.chen@lumen.example")
DEDUPE = thread_key("mail", "a@lumen.example")
ALERTS = thread_key("mail", "alerts-1@lumen.example")
INGEST = page_key("wiki", "65541")
ALERT_PAGE = page_key("wiki", "65542")
INGEST_TITLE = "Ingest: idempotency and the dedupe key"
CRUMBS = [("65537", "Lumen Home"), ("65538", "Architecture")]


def wiki_pages() -> list[dict]:
    return [
        rest_page("65537", "Lumen Home", "<p>Start here.</p>", labels=("lumen",)),
        rest_page("65538", "Architecture",
                  f"<p>Storage: {jira_macro('LUM-2')}. Ingest: "
                  f"{page_link(INGEST_TITLE, 'the dedupe page')}.</p>", ancestors=CRUMBS[:1]),
        rest_page("65541", INGEST_TITLE,
                  f"<h2>Decision</h2><p>Key on (station_id, boot_id, seq), recorded in "
                  f"{jira_macro('LUM-4')}; argued in mid:c@lumen.example by "
                  f"{mention(SAM_ACCOUNT)}.</p>", ancestors=CRUMBS, labels=("adr", "ingest"),
                  version=3),
        rest_page("65542", "Alert rule evaluation",
                  "<p>Rules are evaluated in bulk once a minute.</p>", ancestors=CRUMBS,
                  labels=("alerting",)),
    ]


def write_space(folder, archive):
    """A small HTML space export, zipped as Confluence downloads it."""
    folder.mkdir(parents=True)
    (folder / "index.html").write_text(export_index("OPS", (
        '<ul><li><a href="Operations_1001.html">Operations</a><ul><li>'
        '<a href="Backlog-runbook_1002.html">Backlog runbook</a></li></ul></li></ul>')))
    (folder / "Operations_1001.html").write_text(export_page(
        "OPS", "Operations", [], '<p>See <a href="Backlog-runbook_1002.html">Backlog '
        'runbook</a>.</p>', metadata="Created by <span class='author'> Sam Novak</span>"))
    (folder / "Backlog-runbook_1002.html").write_text(export_page(
        "OPS", "Backlog runbook", [("Operations_1001.html", "Operations")],
        "<h2>Drain</h2><p>When the stream lags (LUM-10), drain it.</p>"))
    zip_folder(folder, archive, "OPS")
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("mail-pages")
    vault = root / "vault"
    vault.mkdir()
    (vault / "Decisions.md").write_text(
        f"# Decisions\n\nThe dedupe decision is written up in [[{INGEST_TITLE}]].\n")
    repo = Repo(root / "lumen")
    repo.commit("LUM-1: ingest API skeleton", {"src/lumen/ingest/api.py": "app = None\n"},
                who=MAYA_ID)
    landed = repo.commit("[LUM-4] Dedupe key (station_id, boot_id, seq)",
                         {"src/lumen/ingest/dedupe.py": "KEY = 3\n"}, who=MAYA_ID)
    shutil.copytree(PROJECT_ROOT / "sample_data" / "tickets" / "jira", root / "jira")
    mail = root / "mail"
    write_mbox(mail / "lists" / "lumen-dev.mbox",
               message("a@lumen.example", "Dedupe key", "LUM-4 needs its dedupe key.\n",
                       cc=DANIEL),
               message("b@lumen.example", "Re: Dedupe key", "observed_at drifts.\n",
                       sender=SAM, to=MAYA, hour=11, reply_to="a@lumen.example"),
               message(None, "Lunch", "Pizza on Friday?\n", sender=SAM, day=10))
    write_maildir(mail / "Inbox", message(
        "c@lumen.example", "Re: Dedupe key",
        f"Decision: (station_id, boot_id, seq). It landed in {landed[:7]}; the write-up is "
        f"{WIKI}/spaces/LUM/pages/65541/Ingest\n", day=12, reply_to="b@lumen.example"))
    (mail / "Inbox" / "new" / "1700000000.garbage.host").write_bytes(b"just text\nno mail\n")
    (mail / "alerts.eml").write_bytes(bytes(message(
        "alerts-1@lumen.example", "Alert rules", "LUM-6: evaluate in bulk.\n", sender=DANIEL,
        to=MAYA, day=15)))
    wiki = root / "wiki"
    write_rest_export(wiki / "content.json",
                      [*wiki_pages(), {"id": "70001", "type": "page", "status": "current"}])
    (wiki / "broken.json").write_text('{"results": [')
    write_space(root / "ops-folder", root / "ops-export.zip")
    path = root / "jarvis.yaml"
    path.write_text(yaml.safe_dump({
        "data_dir": "data", "vaults": {"notes": str(vault)}, "repos": {"lumen": str(repo.path)},
        "tickets": {"jira": str(root / "jira")}, "mail": {"mail": str(mail)},
        "confluence": {"wiki": str(wiki), "ops": str(root / "ops-export.zip")}}))
    config = load_config(path)
    return {"root": root, "config": config, "first": run_refresh(config), "landed": landed}


def layer(report: dict, source: str, asset: str) -> dict:
    [entry] = [s for s in report["sources"] if s["source"] == source]
    return entry["layers"][asset]


def checks_of(report: dict, source: str, asset: str) -> dict:
    """The checks of one asset in a source's run (its kind's raw asset has a
    source_reachable)."""
    [entry] = [s for s in report["sources"] if s["source"] == source]
    return {c["check"]: c for c in entry["checks"] if c["asset"] == asset}


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as instance:
        register(instance, "mail", "mail")
        register(instance, "confluence", "wiki", "ops")
        yield instance


def edges(config, sql: str = "TRUE") -> set[tuple[str, str, str]]:
    return set(rows(config, f"SELECT src, relation, dst FROM graph_edges WHERE {sql}"))


def test_every_kind_is_read_and_bad_items_are_reported_while_the_rest_publishes(project):
    report, config = project["first"], project["config"]
    assert report["ok"], report
    raw = {"raw_notes", "raw_repository", "raw_tickets", "raw_mail", "raw_pages"}
    assert {entry["source"]: sorted(raw & set(entry["layers"]))  # its own kind's raw layer
            for entry in report["sources"]} == {
        "notes": ["raw_notes"], "lumen": ["raw_repository"], "jira": ["raw_tickets"],
        "mail": ["raw_mail"], "wiki": ["raw_pages"], "ops": ["raw_pages"]}
    mail = layer(report, "mail", "raw_mail")
    assert (mail["new"], mail["failed"], mail["rows"]) == (3, 1, 5)  # 3 threads, 5 messages
    [(path, reason)] = rows(config, "SELECT path, reason FROM ingest_failures "
                                    "WHERE source = 'mail'")
    assert path == "Inbox/new/1700000000.garbage.host"
    assert reason == "not a mail message: no From, Date, Subject or Message-ID header"
    [(warnings,)] = rows(config, "SELECT warnings FROM mail_messages WHERE subject = 'Lunch'")
    assert warnings[0].startswith("no Message-ID header; derived id")
    wiki = layer(report, "wiki", "raw_pages")
    assert (wiki["new"], wiki["failed"], wiki["rows"]) == (4, 2, 4)
    assert set(rows(config, "SELECT path, reason FROM ingest_failures WHERE source = 'wiki'")) \
        == {("broken.json", "not valid JSON: Expecting value at line 1 column 14"),
            ("content.json#results[4]", "page 70001: missing 'title'")}
    for source, asset, check in (("mail", "raw_mail", "failed_message_ratio"),
                                 ("wiki", "raw_pages", "failed_page_ratio")):
        ratio = checks_of(report, source, asset)[check]
        assert ratio["severity"] == "WARN" and not ratio["passed"]
        assert checks_of(report, source, asset)["source_reachable"]["passed"]
    assert layer(report, "ops", "raw_pages")["new"] == 2
    assert {entry["source"] for entry in report["sources"]} == {
        "notes", "lumen", "jira", "mail", "wiki", "ops"}
    for entry in report["sources"]:
        for name in ("no_dangling_edges", "every_edge_has_evidence"):
            assert report_check(entry["checks"], name)["passed"], entry


def test_a_thread_spans_mail_files_and_is_chunked_as_an_email_document(project):
    config = project["config"]
    [(message_ids, files)] = rows(
        config, "SELECT t.message_ids, list(DISTINCT m.file ORDER BY m.file) FROM mail_threads t "
                "JOIN mail_messages m USING (source, thread_id) WHERE t.thread_id = ? "
                "GROUP BY ALL", ["a@lumen.example"])
    assert message_ids == ["a@lumen.example", "b@lumen.example", "c@lumen.example"]
    assert files[0].startswith("Inbox/new/") and files[1:] == ["lists/lumen-dev.mbox"]
    assert set(rows(config, "SELECT DISTINCT source_type, doc_key, path FROM chunks "
                            "WHERE source IN ('mail', 'wiki') AND path IN "
                            "('threads/a@lumen.example', 'pages/65541')")) == {
        ("email", DEDUPE, "threads/a@lumen.example"), ("page", INGEST, "pages/65541")}
    version = serving.current_version(config.data_dir)
    searcher = KeywordSearcher(version.keyword_path)
    [hit] = searcher.search("boot_id", limit=5, filters=VectorFilter(source_types=["page"],
                                                                      tags_any=["adr"]))
    assert rows(config, "SELECT path FROM chunks WHERE chunk_id = ?", [hit.chunk_id]) == [
        ("pages/65541",)]
    assert version.manifest["vectors"]["mail"] == rows(
        config, "SELECT count(*) FROM chunks WHERE source = 'mail'")[0][0]


def test_people_fold_with_git_and_jira_and_pages_form_a_hierarchy(project):
    config = project["config"]
    maya = "person:maya.chen@lumen.example"
    assert {(maya, "AUTHORED", DEDUPE), (DEDUPE, "SENT_TO", "person:daniel.okafor@lumen.example"),
            (INGEST, "MENTIONS", "person:sam.novak@lumen.example"),
            ("person:sam.novak@lumen.example", "AUTHORED", INGEST)} <= edges(config)
    assert rows(config, "SELECT count(*) FROM graph_edges WHERE src = ? AND relation = "
                        "'AUTHORED' AND dst LIKE 'commit:%'", [maya]) == [(2,)]
    assert ("ticket:jira/LUM-4", "ASSIGNED_TO", maya) in edges(config)
    assert {(src, dst) for src, relation, dst in edges(config, "source = 'wiki'")
            if relation == "PARENT"} == {(page_key("wiki", "65538"), page_key("wiki", "65537")),
                                         (INGEST, page_key("wiki", "65538")),
                                         (ALERT_PAGE, page_key("wiki", "65538"))}
    assert (page_key("ops", "1002"), "PARENT", page_key("ops", "1001")) in edges(config)
    assert (page_key("ops", "1001"), "LINKS_TO", page_key("ops", "1002")) in edges(config)
    assert (INGEST, "TAGGED", "tag:adr") in edges(config)


def test_cross_source_edges_run_both_ways_with_evidence(project):
    config, landed = project["config"], project["landed"]
    cross = edges(config, "extractor = 'cross_reference'")
    assert {(DEDUPE, "MENTIONS", "ticket:jira/LUM-4"),
            (DEDUPE, "MENTIONS", f"commit:lumen/{landed}"), (DEDUPE, "MENTIONS", INGEST),
            (INGEST, "MENTIONS", "ticket:jira/LUM-4"),
            (INGEST, "MENTIONS", DEDUPE), ("note:notes/Decisions.md", "LINKS_TO", INGEST),
            (ALERTS, "MENTIONS", "ticket:jira/LUM-6"),
            (f"commit:lumen/{landed}", "MENTIONS", "ticket:jira/LUM-4")} <= cross
    [(evidence, text)] = rows(config, "SELECT evidence, evidence_text FROM graph_edges "
                                      "WHERE src = 'note:notes/Decisions.md' AND dst = ?",
                              [INGEST])
    assert text == f"[[{INGEST_TITLE}]]" and len(evidence) == 1
    [(evidence, text)] = rows(config, "SELECT evidence, evidence_text FROM graph_edges "
                                      "WHERE src = ? AND dst = ?",
                              [DEDUPE, f"commit:lumen/{landed}"])
    assert text.startswith("Decision: (station_id, boot_id, seq). It landed in")
    assert rows(config, "SELECT count(*) FROM chunks WHERE list_contains(?, chunk_id)",
                [evidence]) == [(1,)]
    assert report_check(project["first"]["published"]["checks"],
                        "cross_source_edges_valid")["passed"]


def test_nothing_changed_nothing_is_read(project):
    config = project["config"]
    assert pending_sources(config) == {}
    report = run_refresh(config, only=["mail", "wiki"])
    assert report["ok"], report
    assert layer(report, "mail", "raw_mail")["unchanged"] == 3
    assert layer(report, "wiki", "raw_pages")["unchanged"] == 4
    assert layer(report, "mail", "knowledge_graph")["changed"] == 0


def test_a_grown_mbox_requests_a_run_and_reads_only_its_new_message(project, instance):
    config, root = project["config"], project["root"]
    restarted = tick(mail_changes_sensor, config, instance)  # no cursor: the published hashes
    assert not restarted.run_requests
    write_mbox(root / "mail" / "lists" / "lumen-dev.mbox", message(
        "d@lumen.example", "Re: Dedupe key", "The property test is merged.\n", sender=DANIEL,
        day=13, reply_to="c@lumen.example"))
    [request] = tick(mail_changes_sensor, config, instance, restarted.cursor).run_requests
    assert (request.partition_key, request.tags["jarvis/changed_paths"]) == (
        "mail", "lists/lumen-dev.mbox")
    assert set(pending_sources(config)) == {"mail"}
    result = run(config, "mail", instance)
    raw = metadata(result, "raw_mail")
    assert (raw["messages_parsed"], raw["messages_reused"]) == (1, 5)
    assert (raw["new"], raw["changed"], raw["unchanged"]) == (0, 1, 2)
    assert metadata(result, "chunks")["changed"] == 1
    assert rows(config, "SELECT message_count FROM mail_threads WHERE thread_id = ?",
                ["a@lumen.example"]) == [(4,)]
    assert run_refresh(config)["ok"]


def test_an_edited_page_requests_a_run_and_is_reprocessed_alone(project, instance):
    config, root = project["config"], project["root"]
    content = root / "wiki" / "content.json"
    first = tick(confluence_exports_sensor, config, instance)
    content.write_bytes(content.read_bytes())  # touched, not changed: no run
    os.utime(content, ns=(content.stat().st_atime_ns, content.stat().st_mtime_ns + 10**9))
    touched = tick(confluence_exports_sensor, config, instance, first.cursor)
    assert not first.run_requests and not touched.run_requests
    assert touched.cursor != first.cursor
    pages = wiki_pages()
    pages[3] = rest_page("65542", "Alert rule evaluation",
                         "<p>Rules are evaluated per station after all (LUM-6).</p>",
                         ancestors=CRUMBS, labels=("alerting",), version=2)
    write_rest_export(content, [*pages, {"id": "70001", "type": "page", "status": "current"}])
    [request] = tick(confluence_exports_sensor, config, instance, touched.cursor).run_requests
    assert (request.partition_key, request.tags["jarvis/changed_paths"]) == (
        "wiki", "content.json")
    report = run_refresh(config)
    assert report["ok"], report
    raw = layer(report, "wiki", "raw_pages")
    assert (raw["new"], raw["changed"], raw["unchanged"], raw["deleted"]) == (0, 1, 3, 0)
    assert layer(report, "wiki", "chunks")["changed"] == 1
    assert (ALERT_PAGE, "MENTIONS", "ticket:jira/LUM-6") in edges(config)


def test_a_deleted_page_leaves_every_layer(project):
    config, root = project["config"], project["root"]
    pages = [page for page in wiki_pages() if page["id"] != "65541"]
    write_rest_export(root / "wiki" / "content.json", pages)
    report = run_refresh(config)
    assert report["ok"], report
    assert layer(report, "wiki", "raw_pages")["deleted"] == 1
    for sql in ("SELECT count(*) FROM pages WHERE page_id = '65541'",
                "SELECT count(*) FROM chunks WHERE path = 'pages/65541'",
                f"SELECT count(*) FROM graph_nodes WHERE node_key = '{INGEST}'",
                f"SELECT count(*) FROM graph_edges WHERE src = '{INGEST}' OR dst = '{INGEST}'"):
        assert rows(config, sql) == [(0,)], sql
    # the note's wikilink and the thread's URL are references to nothing again
    assert not edges(config, f"dst = '{INGEST}'")
    assert rows(config, "SELECT target FROM graph_broken_links WHERE source = 'notes'") == [
        (INGEST_TITLE,)]
    version = serving.current_version(config.data_dir)
    graph = SqliteGraphStore.open_read_only(version.graph_path)
    try:
        assert graph.node(INGEST) is None and graph.node(DEDUPE) is not None
    finally:
        graph.close()
    hits = KeywordSearcher(version.keyword_path).search("boot_id", limit=20)
    assert "pages/65541" not in {path for (path,) in rows(
        config, "SELECT path FROM chunks WHERE list_contains(?, chunk_id)",
        [[hit.chunk_id for hit in hits]])}
    assert version.manifest["vectors"]["wiki"] == rows(
        config, "SELECT count(*) FROM chunks WHERE source = 'wiki'")[0][0]


def test_a_vanished_mail_folder_keeps_its_data_and_a_dropped_one_is_purged(project):
    config, root = project["config"], project["root"]
    (root / "mail").rename(root / "mail-away")
    report = run_refresh(config, only=["mail"])
    assert layer(report, "mail", "raw_mail")["failed"] == 1
    assert not checks_of(report, "mail", "raw_mail")["source_reachable"]["passed"]
    assert rows(config, "SELECT count(*) FROM mail_messages WHERE source = 'mail'") == [(6,)]
    settings = yaml.safe_load(config.config_path.read_text())
    del settings["mail"]
    config.config_path.write_text(yaml.safe_dump(settings))
    config = load_config(config.config_path)
    report = run_refresh(config)
    assert report["ok"], report
    assert report["reasons"] == {"mail": "no longer configured"}  # the other sources stay
    for table in ("mail_messages", "mail_threads", "mail_files", "chunks", "graph_nodes",
                  "graph_edges", "ingest_failures"):
        assert rows(config, f"SELECT count(*) FROM {table} WHERE source = 'mail'") == [(0,)]
    assert not edges(config, f"src = '{DEDUPE}' OR dst = '{DEDUPE}'")
    assert json.loads(rows(config, "SELECT properties FROM graph_nodes "
                                   "WHERE node_key = 'person:maya.chen@lumen.example'")[0][0])
