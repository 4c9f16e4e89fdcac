"""Which symbols a commit modified: real git repositories made in temp dirs, ingested into
DuckDB as the raw repository and code symbol assets do, their diffs laid over the
tree-sitter parser's symbols (jarvis_core/sources/repo/code/modifies.py)."""

from contextlib import nullcontext

import duckdb
import pytest

from jarvis_core.settings import IngestSettings
from jarvis_core.sources import registry
from jarvis_core.sources.kind import IngestRun
from jarvis_core.sources.plan import utc_now
from jarvis_core.sources.repo.code import ingest as code_ingest
from jarvis_core.sources.repo.code import modifies
from jarvis_core.sources.repo.code.graph import CodeRows
from jarvis_core.sources.repo.code.ingest import code_settings_id
from jarvis_core.sources.repo.code.model import symbol_key
from jarvis_core.sources.repo.code.parse import parse_file
from jarvis_core.sources.repo.graph import EXTRACTOR, commit_key, extract_repo_graph
from jarvis_core.sources.repo.hunks import read_hunks
from jarvis_core.sources.repo.ingest import ingest as repo_ingest
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


def ingested(conn, repo: Repo, configured: bool = True, **code) -> list[str]:
    """Ingest ``repo`` as the raw repository and code symbol assets do (as a source no longer
    configured: ``configured`` false; ``vendor/**`` excluded); the warnings they gave."""
    warnings: list[str] = []
    settings = RepoConfig(path=repo.path, exclude=("vendor/**",),
                          code=CodeSettings(**code)) if configured else None
    run = IngestRun("lumen", settings,
                    lambda: nullcontext(conn), IngestSettings(), repo.path.parent, utc_now(),
                    warnings.append)
    repo_ingest(run)
    code_ingest.ingest(run)
    return warnings


def edit(repo: Repo, message: str, *replacements: tuple[str, str]) -> str:
    """Commit ``src/service.py`` as it is with each (old, new) of ``replacements`` made."""
    text = (repo.path / "src/service.py").read_text()
    for before, after in replacements:
        assert before in text
        text = text.replace(before, after)
    return repo.commit(message, {"src/service.py": text})


def store_head_symbols(conn, repo: Repo, leave_out: str) -> None:
    """The code tables as the code layer leaves them: the head's ``src/service.py`` parsed,
    without the symbol ``leave_out``."""
    settings = code_settings_id(RepoConfig(path=repo.path))
    tables.replace_rows(conn, registry.table("code_state"), source="lumen", remove_paths=None,
                        rows=[{"source": "lumen", "settings": settings}])
    blob = repo.git("rev-parse", "HEAD:src/service.py")
    parsed = parse_file("src/service.py", (repo.path / "src/service.py").read_bytes())
    symbols = [symbol for symbol in parsed.symbols if symbol.symbol_id != leave_out]
    tables.replace_rows(conn, registry.table("code_files"), source="lumen", remove_paths=None,
                        rows=[{"source": "lumen", "path": "src/service.py", "blob_sha": blob,
                               "language": "python", "status": "parsed",
                               "symbols": len(symbols)}])
    tables.replace_rows(conn, registry.table("code_symbols"), source="lumen",
                        remove_paths=None,
                        rows=[{"source": "lumen", "path": "src/service.py",
                               "language": "python", **vars(symbol)} for symbol in symbols])


def modified(conn, sha: str) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    return {(path, symbol_id): tuple(rest) for sha_, path, symbol_id, *rest in conn.execute(
        "SELECT sha, path, symbol_id, start_line, end_line, additions, deletions "
        "FROM commit_symbols WHERE source = 'lumen'").fetchall() if sha_ == sha}


def test_an_edit_of_one_function_body_modifies_that_function_only(conn, repo):
    edited = edit(repo, "Load with a fallback", ("json.load(handle)", "json.load(handle) or {}"))
    ingested(conn, repo)
    assert modified(conn, edited) == {("src/service.py", "load"): (6, 6, 1, 1)}


def test_an_added_method_modifies_that_method_not_its_class_or_siblings(conn, repo):
    added = edit(repo, "Service.stop", ("check()\n", "check()\n\n    def stop(self):\n"
                                                  "        self.store.close()\n"))
    ingested(conn, repo)
    assert modified(conn, added) == {("src/service.py", "Service.stop"): (18, 19, 2, 0)}


def test_deleted_lines_modify_the_symbol_that_held_them(conn, repo):
    inside = edit(repo, "Start without warming", ("        self.store.warm()\n", ""))
    whole = edit(repo, "No explicit constructor",
                 ("    def __init__(self, store):\n        self.store = store\n\n", ""))
    ingested(conn, repo)
    assert modified(conn, inside) == {("src/service.py", "Service.start"): (14, 14, 0, 1)}
    # the method is gone: its class held the lines around the deletion
    assert modified(conn, whole) == {("src/service.py", "Service"): (9, 9, 0, 2)}


def test_only_the_newest_commits_of_a_first_ingest_are_mapped_then_every_new_one(conn, repo):
    old = edit(repo, "Load: a docstring",
               ("def load(path):\n", 'def load(path):\n    """The JSON at path."""\n'))
    newest = edit(repo, "Load: utf-8", ("open(path)", "open(path, encoding='utf-8')"))
    ingested(conn, repo, history_commits=1)
    assert conn.execute("SELECT DISTINCT sha FROM commit_symbols").fetchall() == [(newest,)]

    later = edit(repo, "Service.start: check strictly", ("check()", "check(strict=True)"))
    ingested(conn, repo, history_commits=1)
    assert {sha for (sha,) in conn.execute("SELECT sha FROM commit_symbols").fetchall()} == {
        newest, later}
    assert modified(conn, old) == {}

    ingested(conn, repo, history_commits=3)  # other settings: the newest commits mapped again
    assert {sha for (sha,) in conn.execute("SELECT sha FROM commit_symbols").fetchall()} == {
        old, newest, later}


def test_a_force_push_drops_its_commits_rows_and_a_removed_source_all_rows(conn, repo):
    dropped = edit(repo, "Start: warm twice", ("warm()\n", "warm()\n        self.store.warm()\n"))
    ingested(conn, repo)
    assert modified(conn, dropped)
    repo.git("reset", "-q", "--hard", "HEAD~1")
    kept = edit(repo, "Start: check strictly", ("check()", "check(strict=True)"))
    warnings = ingested(conn, repo)
    assert any("history rewritten" in warning for warning in warnings)
    assert modified(conn, dropped) == {}
    assert modified(conn, kept) == {("src/service.py", "Service.start"): (16, 16, 1, 1)}

    ingested(conn, repo, configured=False)
    assert conn.execute("SELECT count(*) FROM commit_symbols").fetchone() == (0,)


def test_a_blob_at_the_head_is_parsed_once_the_commits_reading_the_code_layers_symbols(
        conn, repo, monkeypatch):
    head = edit(repo, "Load: utf-8", ("open(path)", "open(path, encoding='utf-8')"))
    parsed = []
    for module in (code_ingest, modifies):
        monkeypatch.setattr(module, "parse_file", lambda path, data, limits=None, _m=module: (
            parsed.append((_m.__name__.rsplit(".", 1)[-1], data)) or parse_file(path, data,
                                                                                limits)))
    ingested(conn, repo)
    head_blob = (repo.path / "src/service.py").read_bytes()
    assert sorted(parsed) == [("ingest", head_blob), ("modifies", SERVICE.encode())]
    assert conn.execute("SELECT count(*) FROM commit_symbols_pending").fetchone() == (0,)

    parsed.clear()
    ingested(conn, repo, history_commits=10)  # other settings: the newest mapped again
    assert parsed == [("modifies", SERVICE.encode())]  # the first commit's blob only
    assert modified(conn, head) == {("src/service.py", "load"): (5, 5, 1, 1)}


def test_commits_stay_pending_until_the_code_layer_maps_them(conn, repo):
    edited = edit(repo, "Load with a fallback", ("json.load(handle)", "json.load(handle) or {}"))
    run = IngestRun("lumen", RepoConfig(path=repo.path), lambda: nullcontext(conn),
                    IngestSettings(), repo.path.parent, utc_now(), print)
    repo_ingest(run)  # the code layer fails or has not run yet
    assert modified(conn, edited) == {}
    assert len(conn.execute("SELECT sha FROM commit_symbols_pending").fetchall()) == 2
    code_ingest.ingest(run)
    assert modified(conn, edited) == {("src/service.py", "load"): (6, 6, 1, 1)}
    assert conn.execute("SELECT count(*) FROM commit_symbols_pending").fetchone() == (0,)


def test_modifies_edges_go_from_the_commit_to_the_symbols_still_at_the_head(conn, repo):
    edited = edit(repo, "Load with a fallback", ("json.load(handle)", "json.load(handle) or {}"))
    ingested(conn, repo)
    store_head_symbols(conn, repo, leave_out="Service.__init__")
    rows = {name: [dict(zip([c[0] for c in found.description], row, strict=True))
                   for row in found.fetchall()]
            for name, sql in EXTRACTOR.queries.items() if name != "people"
            for found in [conn.execute(sql, ["lumen"])]}
    graph = extract_repo_graph("lumen", rows["commits"], rows["commit_files"],
                               rows["repo_files"], rows["repo_docs"], rows["repo_knowledge"],
                               [], code=CodeRows(rows["code_files"], rows["code_symbols"],
                                                 rows["code_references"]),
                               commit_symbols=rows["commit_symbols"])
    symbol_edges = {(edge.src, edge.dst, edge.evidence_text) for edge in graph.edges
                    if edge.relation == "MODIFIES" and edge.dst.startswith("symbol:")}
    assert {dst for _, dst, _ in symbol_edges} <= {node.key for node in graph.nodes}
    first = repo.git("rev-list", "--max-parents=0", "HEAD")
    assert (commit_key("lumen", edited), symbol_key("lumen", "src/service.py", "load"),
            "src/service.py:6 +1 -1") in symbol_edges
    # the first commit added every symbol; the one no longer at the head has no edge
    assert {dst for src, dst, _ in symbol_edges if src == commit_key("lumen", first)} == {
        symbol_key("lumen", "src/service.py", symbol_id)
        for symbol_id in ("load", "Service", "Service.start")}


def test_hunks_give_the_new_side_lines_and_the_blob_the_commit_left(repo):
    for option, value in (("diff.interHunkContext", "5"), ("diff.noprefix", "true"),
                          ("log.showRoot", "false")):  # a user's settings change nothing
        repo.git("config", option, value)
    sha = edit(repo, "Two edits", ("def load(path):", "def load(path, strict):"),
               ("json.load(handle)", "json.load(handle, strict=strict)"))
    repo.commit("A name git quotes", {"src/naïve name.py": "X = 1\n\nY = 2\n"})
    changes, failures = read_hunks(repo.path, repo.git("rev-list", "HEAD").split(),
                                   [":(glob)**/*.py"])
    assert failures == []
    [edited] = changes[sha]
    assert edited.blob_sha == repo.git("rev-parse", f"{sha}:src/service.py")
    assert [(hunk.start, hunk.added, hunk.deleted) for hunk in edited.hunks] == [
        (4, (4,), 1), (6, (6,), 1)]
    [quoted] = changes[repo.git("rev-parse", "HEAD")]
    assert quoted.path == "src/naïve name.py" and [h.added for h in quoted.hunks] == [(1, 3)]
    first = repo.git("rev-list", "--max-parents=0", "HEAD")
    assert [change.path for change in changes[first]] == ["src/service.py"]


def test_excluded_code_has_no_rows_and_patterns_git_refuses_are_harmless(conn, repo):
    repo.commit("Vendored helpers", {"vendor/json5/parse.py": "def parse(text):\n    pass\n",
                                     "third/lib/util.py": "def util():\n    pass\n"})
    warnings = ingested(conn, repo, exclude=("third/*", "/abs/**", "../up/**", ""))
    assert warnings == ["lumen/third/lib/util.py: skipped: excluded as vendored or built "
                        "(pattern 'third/*')"]  # the code layer's, and no git error
    # vendor/ by the repository's exclude; third/lib/ matched by fnmatch's * though not git's
    assert {path for (path,) in conn.execute(
        "SELECT DISTINCT path FROM commit_symbols").fetchall()} == {"src/service.py"}
