"""Which symbols a commit modified: real git repositories made in temp dirs, ingested into
DuckDB as the raw repository asset does, their diffs laid over the tree-sitter parser's
symbols (jarvis_core/sources/repo/code/modifies.py)."""

from contextlib import nullcontext

import duckdb
import pytest

from jarvis_core.settings import IngestSettings
from jarvis_core.sources import registry
from jarvis_core.sources.kind import IngestRun
from jarvis_core.sources.plan import utc_now
from jarvis_core.sources.repo.code import modifies
from jarvis_core.sources.repo.code.model import symbol_key
from jarvis_core.sources.repo.code.parse import parse_file
from jarvis_core.sources.repo.graph import EXTRACTOR, commit_key, extract_repo_graph
from jarvis_core.sources.repo.hunks import read_hunks
from jarvis_core.sources.repo.ingest import ingest
from jarvis_core.sources.repo.settings import CodeSettings, RepoConfig
from jarvis_core.stores import tables
from tests.source_helpers import Repo

SERVICE = '''\
import json


def load(path):
    with open(path) as handle:
        return json.load(handle)


class Service:
    def __init__(self, store):
        self.store = store

    def start(self):
        self.store.open()
        self.store.warm()
        self.store.check()
'''


@pytest.fixture
def conn():
    with duckdb.connect() as connection:
        tables.ensure_schema(connection, registry.declared_tables())
        yield connection


@pytest.fixture
def repo(tmp_path) -> Repo:
    repo = Repo(tmp_path / "repo")
    repo.commit("Service skeleton", {"src/service.py": SERVICE, "README.md": "# Lumen\n"})
    return repo


def ingested(conn, repo: Repo, **code) -> list[str]:
    """Ingest ``repo`` as the raw repository asset does; the warnings it gave."""
    warnings: list[str] = []
    run = IngestRun("lumen", RepoConfig(path=repo.path, code=CodeSettings(**code)),
                    lambda: nullcontext(conn), IngestSettings(), repo.path.parent, utc_now(),
                    warnings.append)
    ingest(run)
    return warnings


def modified(conn, sha: str) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    return {(path, symbol_id): tuple(rest) for sha_, path, symbol_id, *rest in conn.execute(
        "SELECT sha, path, symbol_id, start_line, end_line, additions, deletions "
        "FROM commit_symbols WHERE source = 'lumen'").fetchall() if sha_ == sha}


def test_an_edit_of_one_function_body_modifies_that_function_only(conn, repo):
    edited = repo.commit("Load with a fallback", {"src/service.py": SERVICE.replace(
        "        return json.load(handle)", "        return json.load(handle) or {}")})
    ingested(conn, repo)
    assert modified(conn, edited) == {("src/service.py", "load"): (6, 6, 1, 1)}


def test_an_added_method_modifies_that_method_not_its_class_or_siblings(conn, repo):
    added = repo.commit("Service.stop", {"src/service.py": SERVICE + (
        "\n    def stop(self):\n        self.store.close()\n")})
    ingested(conn, repo)
    assert modified(conn, added) == {("src/service.py", "Service.stop"): (18, 19, 2, 0)}


def test_deleted_lines_modify_the_symbol_that_held_them(conn, repo):
    inside = repo.commit("Start without warming", {"src/service.py": SERVICE.replace(
        "        self.store.warm()\n", "")})
    whole = repo.commit("No explicit constructor", {"src/service.py": SERVICE.replace(
        "        self.store.warm()\n", "").replace(
        "    def __init__(self, store):\n        self.store = store\n\n", "")})
    ingested(conn, repo)
    assert modified(conn, inside) == {("src/service.py", "Service.start"): (14, 14, 0, 1)}
    # the method is gone: its class held the lines around the deletion
    assert modified(conn, whole) == {("src/service.py", "Service"): (9, 9, 0, 2)}


def test_only_the_newest_commits_of_a_first_ingest_are_mapped_then_every_new_one(conn, repo):
    old = repo.commit("Load: a docstring", {"src/service.py": SERVICE.replace(
        "def load(path):\n", 'def load(path):\n    """The JSON at path."""\n')})
    newest = repo.commit("Load: utf-8", {"src/service.py": SERVICE.replace(
        "def load(path):\n", 'def load(path):\n    """The JSON at path."""\n').replace(
        "open(path)", "open(path, encoding='utf-8')")})
    ingested(conn, repo, history_commits=1)
    assert conn.execute("SELECT DISTINCT sha FROM commit_symbols").fetchall() == [(newest,)]

    later = repo.commit("Service.start: check first", {"src/service.py": SERVICE.replace(
        "def load(path):\n", 'def load(path):\n    """The JSON at path."""\n').replace(
        "open(path)", "open(path, encoding='utf-8')").replace(
        "        self.store.check()\n", "").replace(
        "        self.store.open()\n", "        self.store.check()\n        self.store.open()\n")})
    ingested(conn, repo, history_commits=1)
    assert {sha for (sha,) in conn.execute("SELECT sha FROM commit_symbols").fetchall()} == {
        newest, later}
    assert modified(conn, old) == {}


def test_a_force_push_removes_the_rows_of_the_commits_it_dropped(conn, repo):
    dropped = repo.commit("Start: warm twice", {"src/service.py": SERVICE.replace(
        "        self.store.warm()\n", "        self.store.warm()\n        self.store.warm()\n")})
    ingested(conn, repo)
    assert modified(conn, dropped)
    repo.git("reset", "-q", "--hard", "HEAD~1")
    kept = repo.commit("Start: check strictly", {"src/service.py": SERVICE.replace(
        "self.store.check()", "self.store.check(strict=True)")})
    warnings = ingested(conn, repo)
    assert any("history rewritten" in warning for warning in warnings)
    assert modified(conn, dropped) == {}
    assert modified(conn, kept) == {("src/service.py", "Service.start"): (16, 16, 1, 1)}


def test_symbols_of_a_blob_at_the_head_are_read_from_the_code_tables(conn, repo, monkeypatch):
    head = repo.commit("Load: utf-8", {"src/service.py": SERVICE.replace(
        "open(path)", "open(path, encoding='utf-8')")})
    blob = repo.git("rev-parse", f"{head}:src/service.py")
    parsed = parse_file("src/service.py", (repo.path / "src/service.py").read_bytes())
    tables.replace_rows(conn, registry.table("code_files"), source="lumen", remove_paths=None,
                        rows=[{"source": "lumen", "path": "src/service.py", "blob_sha": blob,
                               "language": "python", "status": "parsed",
                               "symbols": len(parsed.symbols)}])
    tables.replace_rows(conn, registry.table("code_symbols"), source="lumen",
                        remove_paths=None,
                        rows=[{"source": "lumen", "path": "src/service.py",
                               "language": "python", **vars(symbol)}
                              for symbol in parsed.symbols])
    read = []
    monkeypatch.setattr(modifies, "parse_file",
                        lambda path, data, limits: read.append(data) or parse_file(path, data,
                                                                                   limits))
    ingested(conn, repo)
    assert read == [SERVICE.encode()]  # the first commit's blob only
    assert modified(conn, head) == {("src/service.py", "load"): (5, 5, 1, 1)}


def test_modifies_edges_go_from_the_commit_to_the_symbols_still_at_the_head(conn, repo):
    edited = repo.commit("Load with a fallback", {"src/service.py": SERVICE.replace(
        "        return json.load(handle)", "        return json.load(handle) or {}")})
    ingested(conn, repo)
    parsed = parse_file("src/service.py", (repo.path / "src/service.py").read_bytes())
    gone = "Service.__init__"
    tables.replace_rows(conn, registry.table("code_symbols"), source="lumen",
                        remove_paths=None,
                        rows=[{"source": "lumen", "path": "src/service.py",
                               "language": "python", **vars(symbol)}
                              for symbol in parsed.symbols if symbol.symbol_id != gone])
    rows = {name: [dict(zip([c[0] for c in found.description], row, strict=True))
                   for row in found.fetchall()]
            for name, sql in EXTRACTOR.queries.items() if name != "people"
            for found in [conn.execute(sql, ["lumen"])]}
    graph = extract_repo_graph("lumen", rows["commits"], rows["commit_files"],
                               rows["repo_files"], rows["repo_docs"], rows["repo_knowledge"],
                               [], commit_symbols=rows["commit_symbols"])
    symbol_edges = {(edge.src, edge.dst, edge.evidence_text) for edge in graph.edges
                    if edge.relation == "MODIFIES" and edge.dst.startswith("symbol:")}
    first = repo.git("rev-list", "--max-parents=0", "HEAD")
    assert (commit_key("lumen", edited), symbol_key("lumen", "src/service.py", "load"),
            "src/service.py:6 +1 -1") in symbol_edges
    # the first commit added every symbol; the one no longer at the head has no edge
    assert {dst for src, dst, _ in symbol_edges if src == commit_key("lumen", first)} == {
        symbol_key("lumen", "src/service.py", symbol_id)
        for symbol_id in ("load", "Service", "Service.start")}


def test_hunks_give_the_new_side_lines_and_the_blob_the_commit_left(repo):
    sha = repo.commit("Rename and edit", {
        "src/service.py": SERVICE.replace("def load(path):", "def load(path, strict):"),
        "src/naïve name.py": "X = 1\n\nY = 2\n"})
    changes, failures = read_hunks(repo.path, [sha], [":(glob)**/*.py"])
    assert failures == []
    by_path = {change.path: change for change in changes[sha]}
    assert set(by_path) == {"src/service.py", "src/naïve name.py"}
    assert by_path["src/service.py"].blob_sha == repo.git("rev-parse", f"{sha}:src/service.py")
    [hunk] = by_path["src/service.py"].hunks
    assert (hunk.start, hunk.added, hunk.deleted) == (4, (4,), 1)
    assert [hunk.added for hunk in by_path["src/naïve name.py"].hunks] == [(1, 3)]
