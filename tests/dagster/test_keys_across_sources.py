"""Every export of the sample configured twice (a Jira project exported twice, one clone as two
repositories, one mbox and one Confluence export as two sources each): document keys carry
their source, so each source has its own documents, chunks and graph nodes, every check
passes (chunk_ids_unique included), references resolve to each copy and SAME_AS links the
copies. A working store written with the keys of the release before is rewritten."""

import subprocess

import duckdb
import pytest
import yaml

from jarvis_core import pending
from jarvis_core.config import load_config
from jarvis_pipeline.refresh import run_refresh
from jarvis_query.knowledge_base import KnowledgeBase
from tests.pipeline_helpers import PROJECT_ROOT, rows

pytestmark = pytest.mark.slow

SAMPLE = PROJECT_ROOT / "sample_data"
LANDED = "5d2429715b4ce7089db5b534cbdbde6f9c6764ef"  # the sample commit adding the dedupe key
TWICE = {"jira": "jira-again", "lumen": "lumen-again", "mail": "mail-again",
         "wiki": "wiki-again"}
NOTE = "note:notes/Dedupe.md"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("twice")
    (root / "vault").mkdir()
    (root / "vault" / "Dedupe.md").write_text(
        "# Dedupe\n\nThe dedupe key was settled in LUM-4 and landed in 5d24297.\n",
        encoding="utf-8")
    subprocess.run(["git", "clone", "-q", str(SAMPLE / "repos" / "lumen.bundle"),
                    str(root / "lumen")], check=True, capture_output=True)
    exports = {("repos", "lumen"): root / "lumen", ("tickets", "jira"): SAMPLE / "tickets" / "jira",
               ("mail", "mail"): SAMPLE / "mail" / "lumen.mbox",
               ("confluence", "wiki"): SAMPLE / "confluence"}
    path = root / "jarvis.yaml"
    path.write_text(yaml.safe_dump({
        "data_dir": "data", "vaults": {"notes": str(root / "vault")},
        **{section: {name: str(where), TWICE[name]: str(where)}
           for (section, name), where in exports.items()}}))
    config = load_config(path)
    return {"config": config, "report": run_refresh(config)}


def test_the_refresh_passes_every_check(project):
    report = project["report"]
    assert report["ok"], report
    checks = [*report["published"]["checks"],
              *(check for entry in report["sources"] for check in entry["checks"])]
    assert [c for c in checks if not c["passed"] and c["severity"] != "WARN"] == []
    unique = [c["passed"] for c in checks if c["check"] == "chunk_ids_unique"]
    assert unique and all(unique)


@pytest.mark.parametrize("source", sorted(TWICE))
def test_each_source_has_its_own_documents_and_chunks(project, source):
    config, again = project["config"], TWICE[source]

    def held(name: str) -> tuple[set[str], set[str], set[str]]:
        [(documents, paths, chunks)] = rows(config, """
            SELECT (SELECT list(doc_key) FROM documents WHERE source = $1),
                   (SELECT list(path) FROM documents WHERE source = $1),
                   (SELECT list(chunk_id) FROM chunks WHERE source = $1)""", [name])
        return set(documents), set(paths), set(chunks)

    (keys, paths, chunks), (keys_again, paths_again, chunks_again) = held(source), held(again)
    assert paths == paths_again and chunks and len(chunks) == len(chunks_again)
    assert not keys & keys_again and not chunks & chunks_again
    prefix = {"jira": "ticket", "lumen": "commit", "mail": "thread", "wiki": "page"}[source]
    assert {key.partition("/")[0] for key in keys} >= {f"{prefix}:{source}"}


def test_the_graph_has_a_node_per_source_linked_by_same_as(project):
    config = project["config"]
    copies = {"ticket": ("ticket:jira/LUM-4", "ticket:jira-again/LUM-4"),
              "commit": (f"commit:lumen/{LANDED}", f"commit:lumen-again/{LANDED}")}
    for first, again in copies.values():
        assert rows(config, "SELECT count(*) FROM graph_nodes WHERE node_key IN (?, ?)",
                    [first, again]) == [(2,)]
        assert rows(config, "SELECT src, dst FROM graph_edges WHERE relation = 'SAME_AS' "
                            "AND ? IN (src, dst)", [first]) == [(first, again)]
    # the note citing LUM-4 and the commit is linked to each source's copy
    cited = {dst for (dst,) in rows(config, "SELECT dst FROM graph_edges WHERE src = ? "
                                            "AND relation = 'MENTIONS'", [NOTE])}
    assert cited == {key for pair in copies.values() for key in pair}
    # so is the commit citing the ticket, in either repository
    assert {(src, dst) for src, dst in rows(
        config, "SELECT src, dst FROM graph_edges WHERE relation = 'MENTIONS' "
                "AND src LIKE 'commit:%' AND dst LIKE 'ticket:%/LUM-4'")} >= {
        (commit, ticket) for commit in copies["commit"] for ticket in copies["ticket"]}
    [(same,)] = rows(config, "SELECT count(*) FROM graph_edges WHERE relation = 'SAME_AS' "
                             "AND src LIKE 'ticket:%'")
    assert same == rows(config, "SELECT count(*) FROM tickets WHERE source = 'jira'")[0][0]


def test_a_search_for_the_key_finds_both_sources_tickets(project):
    knowledge = KnowledgeBase(project["config"])
    try:
        hits = knowledge.search_vault("LUM-4", search_content=True, limit=10,
                                      source_types=["ticket"])
        graph = knowledge.search_graph("ticket:jira-again/LUM-4")
    finally:
        knowledge.close()
    assert {("jira", "tickets/LUM-4"), ("jira-again", "tickets/LUM-4")} <= {
        (hit.vault, hit.path) for hit in hits}
    assert graph["center"]["key"] == "ticket:jira-again/LUM-4"


def test_a_store_with_keys_of_the_release_before_is_rewritten(project, monkeypatch):
    """Last in the module: it rewrites the store as the release before left it (ticket keys
    without their source) under a published version whose layers were older."""
    config = project["config"]
    with duckdb.connect(str(config.duckdb_path)) as conn:
        for table in ("chunks", "chunked_documents"):
            conn.execute(f"UPDATE {table} SET doc_key = 'ticket:' || substr(path, 9) "
                         "WHERE source = 'jira'")
    with monkeypatch.context() as older:
        older.setattr(pending, "LAYERS_VERSION", pending.LAYERS_VERSION - 1)
        reasons = pending.pending_sources(config)
    assert set(reasons) == set(config.source_names)
    assert set(reasons.values()) == {"its settings or Jarvis's layers changed"}
    report = run_refresh(config, only=["jira"])
    assert report["ok"], report
    [entry] = report["sources"]
    assert entry["layers"]["chunks"]["changed"] == 12
    for table in ("chunks", "chunked_documents"):
        assert rows(config, f"SELECT count(*) FROM {table} WHERE doc_key NOT LIKE 'ticket:jira/%' "
                            "AND source = 'jira'") == [(0,)]
