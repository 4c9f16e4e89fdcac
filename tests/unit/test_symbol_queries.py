"""Asking about code (get-symbol, search-code, graph search from a symbol) on a small version
published by hand with the real stores (DuckDB tables, a Tantivy keyword index, the SQLite
graph), no pipeline: a repository `lumen` whose post_reading calls clamp_future and
dedupe_key, a commit that changed clamp_future and fixes the GitHub issue lumen#7, that
issue and a note mentioning clamp_future, and two symbols named `seen`. Profiles that leave
the repository, the tickets or the notes out see none of theirs."""

import hashlib
import json

import duckdb
import polars as pl
import pytest

from jarvis_core.config import config_from_mapping
from jarvis_core.profiles import resolve_profile
from jarvis_core.sources.repo.code.tables import CODE_SYMBOLS
from jarvis_core.stores import serving
from jarvis_core.stores.chunk_rows import FrameRows
from jarvis_core.stores.graph.elements import EXPLICIT, INFERRED, Edge, Node
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_core.stores.keyword import KeywordIndex
from jarvis_core.stores.tables import SHARED_TABLES, ensure_schema
from jarvis_query.access_log import documents_of
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.lookup import DocumentNotFound
from jarvis_query.render_code import render_code_results, render_symbol
from jarvis_query.scoped import scoped_knowledge_base
from jarvis_query.symbols import SymbolNotFound, find_symbols
from jarvis_query.validation import QueryError

CLOCK, API, DEDUPE, STORE = ("src/lumen/ingest/clock.py", "src/lumen/ingest/api.py",
                             "src/lumen/ingest/dedupe.py", "src/lumen/store.py")
# path -> (symbol_id, kind, name, signature, start, end, parent, code)
SYMBOLS = {
    CLOCK: [("clamp_future", "function", "clamp_future",
             "def clamp_future(ts: datetime, max_skew_seconds: int) -> datetime:", 6, 9, None,
             "def clamp_future(ts: datetime, max_skew_seconds: int) -> datetime:\n"
             '    """A timestamp too far ahead becomes server time."""\n'
             "    now = datetime.now(UTC)\n"
             "    return now if ts - now > timedelta(seconds=max_skew_seconds) else ts\n")],
    API: [("post_reading", "function", "post_reading",
           "async def post_reading(reading: dict) -> dict:", 12, 20, None,
           "async def post_reading(reading: dict) -> dict:\n"
           '    reading["ts"] = clamp_future(reading["ts"], max_skew_seconds=300)\n'
           '    key = dedupe_key(reading["station"], reading["boot_id"], reading["seq"])\n')],
    DEDUPE: [("dedupe_key", "function", "dedupe_key",
              "def dedupe_key(station_id: str, boot_id: str, seq: int) -> str:", 4, 5, None,
              "def dedupe_key(station_id: str, boot_id: str, seq: int) -> str:\n"
              '    return f"{station_id}:{boot_id}:{seq}"\n'),
             ("seen", "function", "seen", "async def seen(key: str) -> bool:", 8, 10, None,
              "async def seen(key: str) -> bool:\n    return await redis.get(key)\n")],
    STORE: [("Store", "class", "Store", "class Store:", 1, 10, None, "class Store:\n    ...\n"),
            ("Store.seen", "method", "seen", "def seen(self, key):", 5, 7, "Store",
             "def seen(self, key):\n    return key in self.keys\n"),
            ("MemoryStore", "class", "MemoryStore", "class MemoryStore(Store):", 12, 20, None,
             "class MemoryStore(Store):\n    keys = set()\n")],
}
CLAMP_COMMIT, DEDUPE_COMMIT = "commit:lumen/" + "a" * 40, "commit:lumen/" + "b" * 40
CLAMP_SUBJECT, DEDUPE_SUBJECT = ("Clamp future timestamps from drifting station clocks",
                                 "[LUM-4] Dedupe key")
ISSUE, NOTE = "ticket:gh/lumen#7", "note:notes/Clock drift.md"
MENTION_LINE = ("For now the ingest API clamps them with `clamp_future()` in "
                "src/lumen/ingest/clock.py.")


def symbol(path: str, symbol_id: str) -> str:
    return f"symbol:lumen/{path}::{symbol_id}"


def code(path: str, symbol_id: str) -> str:
    return f"code:lumen/{path}::{symbol_id}"


# (source, doc key, source type, path, title, text, names, modified_at)
DOCUMENTS = [
    *[("lumen", code(path, sid), "code", f"{path}::{sid}", sid, text, [name.lower(), sid.lower()],
       "2026-10-30 10:00:00")
      for path, rows in SYMBOLS.items() for sid, _, name, _, _, _, _, text in rows],
    ("lumen", CLAMP_COMMIT, "commit", "commits/" + "a" * 40,
     CLAMP_SUBJECT, "Fixes #7", ["a" * 40],
     "2026-10-17 07:15:00"),
    ("lumen", DEDUPE_COMMIT, "commit", "commits/" + "b" * 40, DEDUPE_SUBJECT,
     "Idempotent ingest.", ["b" * 40], "2026-10-12 14:20:00"),
    ("gh", ISSUE, "ticket", "lumen#7", "lumen#7: Station clocks drift", MENTION_LINE,
     ["lumen#7"], "2026-11-02 10:00:00"),
    ("notes", NOTE, "note", "Clock drift.md", "Clock drift",
     "Drifting clocks are clamped by `clamp_future` (lumen#7).", ["clock drift"],
     "2026-11-03 10:00:00"),
]


def _edge(src, dst, relation, source, text, confidence=EXPLICIT, extractor="code_name_high",
          origin=None) -> Edge:
    return Edge(src, dst, relation, confidence, extractor, origin or src, source, (), text)


NODES = [
    *[Node(symbol(path, sid), "symbol", sid, "lumen",
           {"kind": kind, "name": name, "path": path, "start_line": start, "end_line": end})
      for path, rows in SYMBOLS.items() for sid, kind, name, _, start, end, _, _ in rows],
    *[Node(f"file:lumen/{path}", "file", path, "lumen", {"path": path}) for path in SYMBOLS],
    Node(CLAMP_COMMIT, "commit", CLAMP_SUBJECT, "lumen"),
    Node(DEDUPE_COMMIT, "commit", DEDUPE_SUBJECT, "lumen"),
    Node(ISSUE, "ticket", "lumen#7: Station clocks drift", "gh"),
    Node(NOTE, "note", "Clock drift", "notes"),
]
EDGES = [
    _edge(symbol(API, "post_reading"), symbol(CLOCK, "clamp_future"), "CALLS", "lumen",
          f"{API}:13  clamp_future()"),
    _edge(symbol(API, "post_reading"), symbol(DEDUPE, "dedupe_key"), "CALLS", "lumen",
          f"{API}:14  dedupe_key()", INFERRED, "code_name_medium"),
    _edge(symbol(STORE, "MemoryStore"), symbol(STORE, "Store"), "EXTENDS", "lumen",
          f"{STORE}:12  class MemoryStore(Store):"),
    _edge(CLAMP_COMMIT, symbol(CLOCK, "clamp_future"), "MODIFIES", "lumen", "+4 -0",
          extractor="git_hunks"),
    _edge(CLAMP_COMMIT, f"file:lumen/{CLOCK}", "MODIFIES", "lumen", "+9 -0",
          extractor="git_numstat"),
    _edge(DEDUPE_COMMIT, f"file:lumen/{DEDUPE}", "MODIFIES", "lumen", "+10 -0",
          extractor="git_numstat"),
    _edge(CLAMP_COMMIT, ISSUE, "FIXES", "lumen", "Fixes #7", extractor="cross_reference",
          origin="xref:" + CLAMP_COMMIT),
    _edge(ISSUE, symbol(CLOCK, "clamp_future"), "MENTIONS", "gh", MENTION_LINE,
          extractor="cross_reference", origin="xref:" + ISSUE),
    _edge(NOTE, symbol(CLOCK, "clamp_future"), "MENTIONS", "notes",
          "Drifting clocks are clamped by `clamp_future` (lumen#7).",
          extractor="cross_reference", origin="xref:" + NOTE),
]


def _chunk_id(doc_key: str) -> str:
    return hashlib.md5(doc_key.encode()).hexdigest()


def _publish(data_dir, staging) -> dict:
    chunks = []
    with duckdb.connect(str(staging / serving.SERVING_TABLES_FILE)) as conn:
        ensure_schema(conn, [*SHARED_TABLES, CODE_SYMBOLS])
        for source, key, source_type, path, title, text, names, modified in DOCUMENTS:
            conn.execute("INSERT INTO documents (source, source_type, doc_key, path, title, "
                         "modified_at, tags, names) VALUES (?, ?, ?, ?, ?, ?, [], ?)",
                         [source, source_type, key, path, title, modified, names])
            conn.execute("INSERT INTO chunks (chunk_id, source, source_type, doc_key, path, "
                         "title, position, heading_path, text, char_start, char_end) VALUES "
                         "(?, ?, ?, ?, ?, ?, 0, [], ?, 0, ?)",
                         [_chunk_id(key), source, source_type, key, path, title, text,
                          len(text)])
            chunks.append({"chunk_id": _chunk_id(key), "source": source,
                           "source_type": source_type, "doc_key": key, "path": path,
                           "title": title, "heading_path": [], "text": text, "tags": [],
                           "modified_at": None})
        for path, rows in SYMBOLS.items():
            for sid, kind, name, signature, start, end, parent, _ in rows:
                conn.execute("INSERT INTO code_symbols (source, path, symbol_id, kind, name, "
                             "qualified_name, signature, doc, start_line, end_line, parent, "
                             "language) VALUES ('lumen', ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, "
                             "'python')", [path, sid, kind, name, sid, signature, start, end,
                                           parent])
        for node in NODES:
            conn.execute("INSERT INTO graph_nodes (source, node_key, type, title, node_source, "
                         "properties) VALUES (?, ?, ?, ?, ?, ?)",
                         [node.source, node.key, node.type, node.title, node.source,
                          json.dumps(node.properties)])
        for edge in EDGES:
            conn.execute("INSERT INTO graph_edges VALUES (?, ?, ?, ?, ?, ?, ?, ?, [], ?, 1.0)",
                         [edge.key, edge.source, edge.origin, edge.src, edge.dst, edge.relation,
                          edge.confidence, edge.extractor, edge.evidence_text])
        conn.execute(f"CREATE TABLE document_names AS {serving.DOCUMENT_NAMES}")
        conn.execute("INSERT INTO graph_broken_links (source, origin, target, reason, "
                     "candidates, line, evidence) VALUES ('lumen', ?, 'seen()', 'ambiguous', "
                     "?, 9, [])", [f"file:lumen/{API}",
                                   [symbol(DEDUPE, "seen"), symbol(STORE, "Store.seen")]])
    with KeywordIndex(data_dir / "keyword") as index:
        frame = pl.DataFrame(chunks)
        for source in frame["source"].unique():
            index.sync_source(source, FrameRows(frame.filter(pl.col("source") == source)))
        index.publish_copy(staging / serving.KEYWORD_DIR)
    with SqliteGraphStore(data_dir / "graph.sqlite") as graph:
        graph.apply([], NODES, EDGES)
        graph.publish_copy(staging / serving.GRAPH_FILE)
    return {"model": "test/model", "dimension": 4, "vector_backend": "edge",
            "collection": "chunks", "graph_backend": "embedded", "chunks": len(chunks),
            "vectors": {}, "vectors_complete": False}


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    root = tmp_path_factory.mktemp("symbols")
    (root / "notes").mkdir()
    config = config_from_mapping({
        "data_dir": "data", "vaults": {"notes": "notes"}, "repos": {"lumen": "lumen"},
        "tickets": {"gh": {"path": "gh", "repo": "lumen"}},
        "profiles": {"code": ["lumen"], "work": ["lumen", "gh"], "personal": ["notes"]}},
        base_dir=root)
    name, staging = serving.begin_version(config.data_dir)
    serving.commit_version(config.data_dir, name, staging, _publish(config.data_dir, staging))
    knowledge_base = KnowledgeBase(config)
    yield knowledge_base
    knowledge_base.close()


def as_profile(kb, profile: str):
    return scoped_knowledge_base(kb, resolve_profile(kb.config, profile))


def keys(items: list[dict]) -> list[str]:
    return [item["key"] for item in items]


def test_a_symbol_shows_its_definition_callers_and_story(kb):
    answer = kb.get_symbol("clamp_future")
    definition = answer["symbol"]
    assert definition["key"] == symbol(CLOCK, "clamp_future")
    assert (definition["vault"], definition["path"]) == ("lumen", f"{CLOCK}::clamp_future")
    assert (definition["file"], definition["start_line"], definition["end_line"]) == (CLOCK, 6, 9)
    assert definition["code"].startswith("def clamp_future(ts: datetime")
    [caller] = answer["callers"]
    assert (caller["title"], caller["file"], caller["line"], caller["confidence"]) == (
        "post_reading", API, 13, "high")
    assert (caller["vault"], caller["path"]) == ("lumen", f"{API}::post_reading")
    assert answer["callees"] == [] and answer["bases"] == []
    assert answer["commits_by"] == "symbol" and keys(answer["commits"]) == [CLAMP_COMMIT]
    [ticket] = answer["tickets"]
    assert (ticket["key"], ticket["relations"], ticket["vault"], ticket["path"]) == (
        ISSUE, ["FIXES"], "gh", "lumen#7")
    assert keys(answer["mentions"]) == [NOTE, ISSUE]  # newest first
    assert answer["mentions"][1]["evidence_text"] == MENTION_LINE
    assert documents_of(answer) == [  # what the access log records of the answer
        f"lumen/{CLOCK}::clamp_future", f"lumen/{API}::post_reading",
        "lumen/commits/" + "a" * 40, "gh/lumen#7", "notes/Clock drift.md"]
    text = render_symbol(answer)
    assert "post_reading  at src/lumen/ingest/api.py:13  (high)" in text
    assert "lumen#7: Station clocks drift  (FIXES by aaaaaaa)  [gh/lumen#7]" in text


def test_who_calls_and_what_is_called_with_confidence(kb):
    answer = kb.get_symbol("dedupe_key")
    assert [(c["title"], c["line"], c["confidence"]) for c in answer["callers"]] == [
        ("post_reading", 14, "medium")]
    callees = kb.get_symbol("post_reading")["callees"]
    assert sorted((c["title"], c["line"]) for c in callees) == [("clamp_future", 13),
                                                                 ("dedupe_key", 14)]


def test_without_commits_of_its_own_the_story_takes_its_file_s_and_says_so(kb):
    answer = kb.get_symbol("dedupe_key")
    assert answer["commits_by"] == "file" and keys(answer["commits"]) == [DEDUPE_COMMIT]
    assert "commits that changed its file (none is recorded" in render_symbol(answer)
    assert kb.get_symbol("Store")["commits_by"] is None


def test_base_and_derived_types(kb):
    assert keys(kb.get_symbol("MemoryStore")["bases"]) == [symbol(STORE, "Store")]
    assert keys(kb.get_symbol("Store")["derived"]) == [symbol(STORE, "MemoryStore")]


def test_a_shared_name_lists_its_symbols_and_each_is_named_more_precisely(kb):
    answer = kb.get_symbol("seen")
    assert answer["symbol"] is None
    assert [(m["file"], m["start_line"], m["qualified_name"]) for m in answer["matches"]] == [
        (DEDUPE, 8, "seen"), (STORE, 5, "Store.seen")]
    assert f"{STORE}:5-7  method Store.seen  def seen(self, key):" in render_symbol(answer)
    assert kb.get_symbol("Store.seen")["symbol"]["key"] == symbol(STORE, "Store.seen")
    assert kb.get_symbol("Store#seen()")["symbol"]["key"] == symbol(STORE, "Store.seen")
    assert kb.get_symbol(f"{STORE}:6")["symbol"]["key"] == symbol(STORE, "Store.seen")  # innermost
    assert kb.get_symbol("store.py:2")["symbol"]["key"] == symbol(STORE, "Store")
    assert kb.get_symbol(symbol(DEDUPE, "seen"))["symbol"]["key"] == symbol(DEDUPE, "seen")
    assert kb.get_symbol(f"{DEDUPE}::seen")["symbol"]["key"] == symbol(DEDUPE, "seen")
    assert kb.get_symbol("memorystore")["symbol"]["qualified_name"] == "MemoryStore"
    [call] = kb.get_symbol("Store.seen")["ambiguous_calls"]
    assert call == {"file": API, "line": 9, "written": "seen()", "candidates": 2}


def test_bad_names_and_repositories_are_refused_with_the_reason(kb):
    with pytest.raises(SymbolNotFound, match="'no_such_thing' names no symbol in 'lumen'"):
        kb.get_symbol("no_such_thing")
    with pytest.raises(QueryError, match="'notes' is not a repository"):
        kb.get_symbol("clamp_future", repo="notes")
    with pytest.raises(QueryError, match="name parameter is required"):
        kb.get_symbol("  ")


def test_search_code_shows_each_symbol_s_place_and_names_first(kb):
    answer = kb.search_code("clamp_future")
    first = answer["results"][0]
    assert (first["file"], first["start_line"], first["end_line"], first["qualified_name"]) \
        == (CLOCK, 6, 9, "clamp_future")
    assert first["identifier"] == "clamp_future"
    assert {hit["source_type"] for hit in answer["results"]} == {"code"}  # not the note
    assert render_code_results(answer).splitlines()[2] == (
        f" 1. {CLOCK}:6-9  clamp_future  def clamp_future(ts: datetime, max_skew_seconds: "
        "int) -> datetime:  (lumen)  [named: clamp_future]")
    with pytest.raises(QueryError, match="'gh' is not a repository"):
        kb.search_code("clamp", repo="gh")


def test_graph_search_and_graphrag_start_from_a_symbol(kb):
    for name in ("clamp_future", symbol(CLOCK, "clamp_future"), f"{CLOCK}:7",
                 f"{CLOCK}::clamp_future", code(CLOCK, "clamp_future")):
        result = kb.search_graph(name)
        assert result["center"]["key"] == symbol(CLOCK, "clamp_future"), name
        assert (result["vault"], result["path"]) == ("lumen", f"{CLOCK}::clamp_future")
        assert {e["src"] for e in result["relationships"]["MENTIONS"]} == {NOTE, ISSUE}
    with pytest.raises(DocumentNotFound):
        kb.search_graph("no_such_thing")
    found = kb.graph.neighbourhoods(kb.snapshots.current(), [code(CLOCK, "clamp_future")], 1)
    assert found.distances[code(API, "post_reading")] == {code(CLOCK, "clamp_future"): 1}
    assert found.distances[ISSUE] == {code(CLOCK, "clamp_future"): 1}
    assert {(e["src"], e["relation"]) for e in found.edges.values()
            if e["dst"] == code(CLOCK, "clamp_future")} >= {
        (code(API, "post_reading"), "CALLS"), (ISSUE, "MENTIONS")}


def test_a_profile_sees_the_symbols_and_story_items_of_its_own_sources_only(kb):
    code_only = as_profile(kb, "code").get_symbol("clamp_future")
    assert keys(code_only["callers"]) == [symbol(API, "post_reading")]
    assert keys(code_only["commits"]) == [CLAMP_COMMIT]
    assert code_only["tickets"] == [] and code_only["mentions"] == []
    work = as_profile(kb, "work").get_symbol("clamp_future")
    assert keys(work["tickets"]) == [ISSUE] and keys(work["mentions"]) == [ISSUE]
    personal = as_profile(kb, "personal")
    with pytest.raises(QueryError, match="no repository is configured"):
        personal.get_symbol("clamp_future")
    with pytest.raises(QueryError, match="'lumen' is not a repository"):
        personal.get_symbol("clamp_future", repo="lumen")
    assert personal.search_code("clamp_future")["results"] == []
    with pytest.raises(DocumentNotFound):
        personal.search_graph(symbol(CLOCK, "clamp_future"))
    snapshot = personal.snapshots.current()  # the tables themselves hold none of it
    assert find_symbols(snapshot, "clamp_future", ["lumen"]) == []
