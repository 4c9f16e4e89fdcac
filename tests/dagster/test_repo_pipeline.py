"""A git repository through every layer: tables, chunks, vectors, graph and search, over
an initial refresh, new commits and a force-push (one module-scoped history of runs)."""

import dagster as dg
import pytest

from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_pipeline.instance import project_instance
from jarvis_pipeline.refresh import run_refresh
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.status import store_status
from jarvis_resources import build_resources
from tests.pipeline_helpers import report_check, rows, write_config
from tests.source_helpers import Repo

pytestmark = pytest.mark.slow

DANA, DANA_LOWER, DANA_COMMA = (("Dana Kim", "dana@lumen.example"),
                                ("dana.kim", "DANA@lumen.example"),
                                ("Kim, Dana", "dana@lumen.example"))
OMAR = ("Omar Haddad", "omar@lumen.example")


def layer(report: dict, asset: str) -> dict:
    [entry] = report["sources"]
    return entry["layers"][asset]


def snapshot(config) -> dict:
    """What every store holds for the repository right now."""
    with SqliteGraphStore(config.graph_path) as graph:
        documents = graph.document_keys("lumen")
        store_edges = {(e.src, e.relation, e.dst) for key in documents
                       for e in graph.neighbourhood(key, 2, limit=10_000).edges}
        dangling = graph.dangling_edges()
    chunk_ids = {chunk_id for (chunk_id,) in rows(config, "SELECT chunk_id FROM chunks")}
    with build_resources(str(config.config_path))["vectors"].open() as vectors:
        vector_ids = vectors.chunk_ids("lumen")
    return {
        "commits": {sha: subject for sha, subject in rows(
            config, "SELECT sha, subject FROM commits WHERE source = 'lumen'")},
        "chunk_paths": {p for (p,) in rows(config, "SELECT DISTINCT path FROM chunks")},
        "chunk_ids": chunk_ids, "vector_ids": vector_ids,
        "nodes": {k: t for k, t in rows(config, "SELECT node_key, type FROM graph_nodes")},
        "edges": {(s, r, d) for s, r, d in rows(
            config, "SELECT src, relation, dst FROM graph_edges WHERE source = 'lumen'")},
        "store_documents": documents, "store_edges": store_edges, "dangling": dangling,
    }


def search(config, query: str, source: str | None = None) -> list:
    kb = KnowledgeBase(config)
    try:
        return kb.search_semantic(query, limit=3, vault=source)
    finally:
        kb.close()


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """Three refreshes: the first history, two new commits, then a force-push."""
    root = tmp_path_factory.mktemp("repo_pipeline")
    repo = Repo(root / "lumen")
    first = [
        repo.commit("Initial commit: README", {"README.md": "# Lumen\n\nWeather stations.\n"},
                    who=DANA),
        repo.commit("[LUM-4] Dedupe key for idempotent ingest",
                    {"src/ingest.py": "def dedupe(station, seq):\n    return (station, seq)\n"},
                    who=DANA_LOWER),
        repo.commit("Gust alert rule", {"src/rules.py": "GUST = 20.0\n"}, who=DANA_COMMA),
    ]
    config = write_config(root / "project", {}, repos={"lumen": {"path": str(repo.path)}})
    runs = {}
    report = run_refresh(config)
    runs["initial"] = {"report": report, "state": snapshot(config), "status": store_status(config),
                       "search": search(config, "Dedupe key for idempotent ingest"),
                       "in_repo": search(config, "weather", source="lumen")}
    added = [repo.commit("Downsample query results to the chart width",
                         {"src/query.py": "def downsample(points, width): ...\n"}, who=OMAR),
             repo.commit("Frost alert rule", {"src/rules.py": "GUST = 20.0\nFROST = 0.5\n"},
                         who=DANA)]
    report = run_refresh(config)
    runs["added"] = {"report": report, "state": snapshot(config)}
    repo.git("reset", "-q", "--hard", "HEAD~1")
    replacement = repo.commit("Frost alert rule at one degree; downsampling moves out",
                              {"src/rules.py": "GUST = 20.0\nFROST = 1.0\n",
                               "src/query.py": None}, who=DANA)
    report = run_refresh(config)
    runs["force_pushed"] = {"report": report, "state": snapshot(config),
                            "search": search(config, "Frost alert rule")}
    removed = write_config(root / "project", {})  # the repository leaves the configuration
    report = run_refresh(removed)
    runs["removed"] = {"report": report, "state": snapshot(removed),
                       "raw_rows": rows(removed, "SELECT (SELECT count(*) FROM commits), "
                                                 "(SELECT count(*) FROM commit_files), "
                                                 "(SELECT count(*) FROM repo_files), "
                                                 "(SELECT count(*) FROM repo_docs), "
                                                 "(SELECT count(*) FROM repo_state), "
                                                 "(SELECT count(*) FROM code_files), "
                                                 "(SELECT count(*) FROM code_symbols)")}
    return {"config": config, "first": first, "new_shas": added, "replacement": replacement,
            **runs}


def test_first_refresh_ingests_commits_files_and_persons(history):
    run = history["initial"]
    assert run["report"]["ok"], run["report"]
    raw = layer(run["report"], "raw_repository")
    # three commits and the README; a first read deletes nothing
    assert (raw["new"], raw["deleted"], raw["failed"]) == (4, 0, 0)
    code = layer(run["report"], "code_symbols")  # src/ingest.py and src/rules.py parsed
    assert (code["new"], code["failed"]) == (2, 0)
    [entry] = run["report"]["sources"]
    for check in ("symbol_files_at_head", "code_parse_failed_ratio"):
        assert report_check(entry["checks"], check, "code_symbols")["passed"]
    state = run["state"]
    assert {"src/ingest.py::dedupe", "src/rules.py::GUST"} <= state["chunk_paths"]
    assert set(state["commits"]) == set(history["first"])
    persons = [key for key, kind in state["nodes"].items() if kind == "person"]
    assert persons == ["person:dana@lumen.example"]  # three spellings of one person
    first, dedupe, gust = (f"commit:lumen/{sha}" for sha in history["first"])
    assert ("person:dana@lumen.example", "AUTHORED", dedupe) in state["edges"]
    assert (dedupe, "PARENT", first) in state["edges"]
    assert (dedupe, "MODIFIES", "file:lumen/src/ingest.py") in state["edges"]
    assert (gust, "MODIFIES", "file:lumen/src/rules.py") in state["edges"]
    assert (dedupe, "MODIFIES", "symbol:lumen/src/ingest.py::dedupe") in state["edges"]
    assert state["store_edges"] >= state["edges"] and state["dangling"] == 0
    assert state["store_documents"] == {first, dedupe, gust, "repo_doc:lumen/README.md"}
    assert state["vector_ids"] == state["chunk_ids"]
    [source] = run["status"]["sources"]
    assert (source["kind"], source["commits"], source["repo_files"], source["repo_docs"]) == (
        "repo", 3, 3, 1)


def test_a_search_for_a_commit_subject_finds_the_commit(history):
    [best, *_] = history["initial"]["search"]
    assert best.path == f"commits/{history['first'][1]}"
    assert best.source_type == "commit" and best.title.startswith("[LUM-4] Dedupe key")
    in_repo = history["initial"]["in_repo"]
    assert in_repo and {r.vault for r in in_repo} == {"lumen"}  # a repository is a filter too


def test_new_commits_are_the_only_work_of_the_next_refresh(history):
    run = history["added"]
    assert run["report"]["ok"], run["report"]
    assert layer(run["report"], "raw_repository")["new"] == 2
    code = layer(run["report"], "code_symbols")  # src/query.py new, src/rules.py changed
    assert (code["new"], code["changed"], code["unchanged"]) == (1, 1, 1)
    chunks = layer(run["report"], "chunks")  # two commits, the downsample function and FROST
    assert (chunks["new"], chunks["changed"], chunks["deleted"]) == (4, 0, 0)
    assert layer(run["report"], "embeddings")["embedded"] == chunks["chunks_added"]
    state = run["state"]
    assert set(state["commits"]) == {*history["first"], *history["new_shas"]}
    assert "person:omar@lumen.example" in state["nodes"]


def test_a_force_push_removes_the_rewritten_commit_everywhere(history):
    run = history["force_pushed"]
    assert run["report"]["ok"], run["report"]
    raw = layer(run["report"], "raw_repository")
    assert (raw["new"], raw["deleted"]) == (1, 1)
    gone, kept = history["new_shas"][1], history["replacement"]
    before, after = history["added"]["state"], run["state"]
    assert gone in before["commits"] and gone not in after["commits"]
    assert kept in after["commits"]
    assert f"commits/{gone}" not in after["chunk_paths"]
    assert f"commit:lumen/{gone}" not in after["nodes"]
    assert f"commit:lumen/{gone}" not in after["store_documents"]
    assert not any(f"commit:lumen/{gone}" in (src, dst) for src, _, dst in after["edges"])
    frost = "symbol:lumen/src/rules.py::FROST"
    assert (f"commit:lumen/{gone}", "MODIFIES", frost) in before["store_edges"]
    assert (f"commit:lumen/{kept}", "MODIFIES", frost) in after["store_edges"]
    assert after["dangling"] == 0
    assert after["vector_ids"] == after["chunk_ids"]
    assert before["vector_ids"] - after["vector_ids"]  # the old commit's vectors went
    # a file gone from the head leaves every layer: its symbols' chunks, vectors and nodes
    code = layer(run["report"], "code_symbols")
    assert (code["changed"], code["deleted"]) == (1, 1)
    assert "src/query.py::downsample" in before["chunk_paths"]
    assert "src/query.py::downsample" not in after["chunk_paths"]
    assert "symbol:lumen/src/query.py::downsample" in before["nodes"]
    assert "symbol:lumen/src/query.py::downsample" not in after["nodes"]
    [best, *_] = run["search"]
    assert best.path == f"commits/{kept}"


def test_a_repository_dropped_from_the_configuration_is_purged(history):
    run = history["removed"]
    assert run["report"]["ok"], run["report"]
    assert [s["source"] for s in run["report"]["sources"]] == ["lumen"]
    assert run["raw_rows"] == [(0, 0, 0, 0, 0, 0, 0)]
    state = run["state"]
    assert state["commits"] == {} and state["chunk_ids"] == set() == state["vector_ids"]
    assert state["edges"] == set() and state["store_documents"] == set()
    assert not [key for key in state["nodes"] if key.startswith(("commit:", "file:lumen"))]

def test_a_folder_that_is_no_repository_fails_only_that_source(tmp_path):
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    (plain / "README.md").write_text("# Just a folder\n")
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "Note.md").write_text("# Note\n\nStill ingested.\n")
    config = write_config(tmp_path / "project", {"notes": tmp_path / "vault"},
                          repos={"plain": str(plain)})
    report = run_refresh(config)
    assert report["ok"], report  # the broken repository does not hold back the vault
    with project_instance(config) as instance:  # what the refresh's run reported
        [latest] = instance.fetch_materializations(dg.AssetKey("raw_repository"),
                                                   limit=1).records
    assert latest.partition_key == "plain"
    meta = {key: value.value for key, value in latest.asset_materialization.metadata.items()}
    assert "not a git repository" in meta["error"] and meta["failed"] == 1
    assert rows(config, "SELECT path, reason FROM ingest_failures WHERE source = 'plain'") == [
        (".", f"{plain}: not a git repository")]
    assert rows(config, "SELECT count(*) FROM notes WHERE source = 'notes'") == [(1,)]
